"""Faults a new user meets, seen at once on the runner's screen (real processes): a missing model
stops the run within seconds with the service's own message, not after a restart loop."""

from __future__ import annotations

import subprocess
import time

import pytest

from tests.e2e._harness import ROOT, env_for, read_log, run_argv, run_ids
from treegrpo.events import Kind

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]


def test_a_missing_model_stops_the_run_at_once_with_the_reason_on_screen(tmp_path):
    home = tmp_path / "home"  # fresh: no model built, as on a first `treegrpo run`
    argv = run_argv("treegrpo/examples/run-small.toml", sets=("runner.timeout_s=600", "run.rounds=1"))
    started = time.monotonic()
    done = subprocess.run(argv, env=env_for(home), cwd=ROOT, capture_output=True, text=True, timeout=280)
    took = time.monotonic() - started
    screen = done.stdout + done.stderr
    assert done.returncode == 1, screen[-3000:]
    assert "failed permanently" in screen and "no model at" in screen and "treegrpo model init" in screen
    assert took < 180, f"took {took:.0f}s"  # seconds of service start-up, not runner.timeout_s (600 s)
    (run_id,) = run_ids(home)
    starts = (home / "runs" / run_id / "logs" / "sampler.log").read_text().count("==== start")
    assert starts == 1  # never restarted
    log = read_log(home, run_id)
    assert log.counts[Kind.RUN_ENDED] == 1 and log.counts[Kind.NODE_SAMPLED] == 0
