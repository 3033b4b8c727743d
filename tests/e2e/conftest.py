"""Fixtures shared by the end-to-end suites."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def demo_policy(tmp_path_factory):
    """The demo policy built exactly as `make demo` builds it (small local model + SFT on the seed
    corpus), once per session: the SFT takes ~3.5 min on 2 cores and two suites need it."""
    from treegrpo_learner.sft import prepare_demo_policy

    home = tmp_path_factory.mktemp("demo-policy-home")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TREEGRPO_HOME", str(home))
        return prepare_demo_policy(home / "demo", show_progress=False)
