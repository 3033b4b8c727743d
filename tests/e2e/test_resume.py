"""Ctrl-C (or SIGTERM) stops a run cleanly; `treegrpo run --resume RUN` finishes it with nothing lost
or doubled."""

from __future__ import annotations

import signal
import subprocess
import time

import pytest

from tests.e2e._harness import (
    ROOT,
    env_for,
    export_records,
    home_processes,
    prepare_home,
    read_log,
    run_argv,
    run_ids,
    start_run,
)
from treegrpo.events import Kind

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]


def _wait_for_round_1(home, proc) -> str:
    while not run_ids(home) and proc.poll() is None:
        time.sleep(0.2)
    (run_id,) = run_ids(home)
    sampler_log = home / "runs" / run_id / "logs" / "sampler.log"
    deadline = time.time() + 300
    while time.time() < deadline:  # interrupt once the sampler has sampled something
        if sampler_log.exists() and "round 1 complete" in sampler_log.read_text():
            return run_id
        time.sleep(0.5)
    raise AssertionError((home / "run.log").read_text()[-3000:])


def test_interrupted_run_resumes_to_exactly_the_expected_nodes(tmp_path):
    home = tmp_path / "home"
    model = prepare_home(home)
    sets = [f'sampler.model="{model}"', f'learner.model="{model}"', "run.rounds=3"]
    proc = start_run(home, "treegrpo/examples/run-small.toml", *sets)
    run_id = _wait_for_round_1(home, proc)
    proc.send_signal(signal.SIGINT)
    assert proc.wait(120) == 130, (home / "run.log").read_text()[-3000:]
    assert "resume with" in (home / "run.log").read_text()
    # the runner gives up (and stops its services) before the test's own timeout
    argv = run_argv(
        "treegrpo/examples/run-small.toml", "--resume", run_id, sets=[*sets, "runner.timeout_s=480"]
    )
    done = subprocess.run(argv, env=env_for(home), cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    log = read_log(home, run_id)
    n = 1 * 3 * 3 * 2
    assert log.counts[Kind.NODE_SAMPLED] == n and len(set(log.node_ids)) == n
    assert len(log.groups_scored) == len(set(log.groups_scored)) == 9
    assert len(log.groups_trained) == len(set(log.groups_trained))
    assert log.counts[Kind.RUN_STARTED] == 1
    assert len(export_records(home / "runs" / run_id / "export")) == n


def test_sigterm_stops_a_run_as_ctrl_c_does(tmp_path):
    home = tmp_path / "home"
    model = prepare_home(home)
    sets = [f'sampler.model="{model}"', f'learner.model="{model}"', "run.rounds=50"]  # far from done
    proc = start_run(home, "treegrpo/examples/run-small.toml", *sets)
    run_id = _wait_for_round_1(home, proc)
    proc.send_signal(signal.SIGTERM)  # `kill`, a container stop
    assert proc.wait(120) == 130, (home / "run.log").read_text()[-3000:]
    assert "resume with" in (home / "run.log").read_text()
    assert home_processes(home) == {}  # services drained, the embedded server let go
    log = read_log(home, run_id)
    assert log.counts[Kind.RUN_ENDED] == 1 and log.counts[Kind.RUN_COMPLETED] == 0
