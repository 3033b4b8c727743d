"""Fixtures shared by the end-to-end suites."""

from __future__ import annotations

import os
from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def demo_policy(tmp_path_factory):
    """The demo policy built exactly as `make demo` builds it (small local model + SFT on the seed
    corpus), once per session: the SFT takes ~3.5 min on 2 cores and two suites need it. Under
    $TREEGRPO_TEST_DEMO_POLICY when set (`.ci/run` starts that build in the background, beside
    lint and `make test`: demo_policy.py), else in a fresh folder."""
    from tests.e2e.demo_policy import FOLDER_ENV, build

    folder = os.environ.get(FOLDER_ENV)
    return build(Path(folder) if folder else tmp_path_factory.mktemp("demo-policy"))


@pytest.fixture(scope="session")
def demo_pair(tmp_path_factory, demo_policy):
    """`treegrpo run demo.toml --control` at DEMO_SEED with the demo policy, as `make demo` runs it,
    once per session (~6 min on 2 cores): the learning test reads its verdict, the explorer's
    browser test its report.html. (TREEGRPO_HOME, the train arm's run id; the control's is
    `<id>-control`.)"""
    from tests.e2e._harness import DEMO_SEED, prepare_home, run_paired

    home = tmp_path_factory.mktemp("demo-pair") / "home"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TREEGRPO_HOME", str(home))
        prepare_home(home)
        run_paired(
            home,
            "treegrpo/examples/demo.toml",
            f'sampler.model="{demo_policy}"',
            f'learner.model="{demo_policy}"',
            'run.run_id="learn"',
            f"run.seed={DEMO_SEED}",
            "runner.live=false",
            timeout=2000,
        )
    return home, "learn"
