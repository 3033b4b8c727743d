"""Ctrl-C stops a run cleanly; `treegrpo run --resume RUN` finishes it with nothing lost or doubled."""

from __future__ import annotations

import signal
import subprocess
import time

import pytest

from tests.e2e._harness import (
    ROOT,
    env_for,
    export_records,
    prepare_home,
    read_log,
    run_argv,
    run_ids,
    start_run,
)
from treegrpo.events import Kind

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]


def test_interrupted_run_resumes_to_exactly_the_expected_nodes(tmp_path):
    home = tmp_path / "home"
    model = prepare_home(home)
    sets = [f'sampler.model="{model}"', f'learner.model="{model}"', "run.rounds=3"]
    proc = start_run(home, "treegrpo/examples/run-small.toml", *sets)
    while not run_ids(home) and proc.poll() is None:
        time.sleep(0.2)
    (run_id,) = run_ids(home)
    export_dir = home / "runs" / run_id / "logs"
    deadline = time.time() + 300
    while time.time() < deadline:  # interrupt once the sampler has sampled something
        log = (export_dir / "sampler.log").read_text() if (export_dir / "sampler.log").exists() else ""
        if "round 1 complete" in log:
            break
        time.sleep(0.5)
    proc.send_signal(signal.SIGINT)
    assert proc.wait(120) == 130
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
