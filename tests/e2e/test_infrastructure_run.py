"""An executor that cannot run anything fails the run fast (real `treegrpo run`, real processes).

The fault is injected from outside: the sandbox's interpreter does not exist. Before issue 25
every node was retried ten times, dead-lettered, and the run waited out `runner.timeout_s`
(300 s here) with nothing on screen but a growing error count; now the executor masks the first
nodes as infrastructure faults, stops as a permanent fault, and the run ends with its reason.
"""

from __future__ import annotations

import subprocess
import time

import pytest

from tests.e2e._harness import ROOT, env_for, prepare_home, read_log, run_argv, run_ids
from treegrpo.events import INFRASTRUCTURE, Kind

pytestmark = [pytest.mark.slow, pytest.mark.timeout(420)]


def test_a_run_whose_executor_cannot_run_scripts_stops_at_once_with_the_reason(tmp_path):
    home = tmp_path / "home"
    model = prepare_home(home)
    src = home / "replay"  # completions with code, so that nodes reach the sandbox
    src.mkdir()
    (src / "hello.py").write_text("print('hello')\n")
    argv = run_argv(
        "treegrpo/examples/run-small.toml",
        sets=(
            f'sampler.model="{model}"',
            f'learner.model="{model}"',
            'sampler.backend="replay"',
            f'sampler.replay.source_dir="{src}"',
            "runner.timeout_s=300",
            "run.rounds=1",
            f'executor.local.python="{tmp_path / "no-such-env" / "bin" / "python"}"',
        ),
    )
    started = time.monotonic()
    done = subprocess.run(argv, env=env_for(home), cwd=ROOT, capture_output=True, text=True, timeout=400)
    took = time.monotonic() - started
    screen = done.stdout + done.stderr
    assert done.returncode == 1, screen[-3000:]
    assert "the executor cannot run scripts" in screen and "sandbox setup failed" in screen, screen[-3000:]
    assert "Traceback" not in screen
    assert took < 150, f"took {took:.0f}s (runner.timeout_s is 300)"
    (run_id,) = run_ids(home)
    log = read_log(home, run_id)
    assert log.counts[Kind.RUN_ENDED] == 1
    assert log.graded_status[INFRASTRUCTURE] >= 3 and log.graded_status.keys() <= {INFRASTRUCTURE}
