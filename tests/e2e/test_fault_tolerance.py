"""Fault tolerance with real kills: SIGKILL services and the nats-server at random (seeded)
moments of a real run; the supervisor restarts them; the run must finish with exactly the expected
nodes, none duplicated, every group scored once and trained at most once."""

from __future__ import annotations

import json
import os
import random
import signal
import time

import pytest

from tests.e2e._harness import export_records, prepare_home, read_log, run_ids, start_run
from treegrpo.events import Kind

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1200)]


def _pid_of(home, target: str) -> int | None:
    if target == "nats":
        f = home / "nats" / "data" / "nats-server.pid"
        return int(f.read_text().strip()) if f.exists() else None
    runs = run_ids(home)
    f = home / "runs" / runs[0] / "pids.json" if runs else None
    if f is None or not f.exists():
        return None
    return json.loads(f.read_text()).get(target)


def test_run_completes_exactly_once_under_random_sigkills_of_services_and_nats(tmp_path):
    rng = random.Random(20261130)
    home = tmp_path / "home"
    model = prepare_home(home)
    tasks, rounds, e, g = 1, 5, 3, 2
    proc = start_run(
        home,
        "treegrpo/examples/run-small.toml",
        f'sampler.model="{model}"',
        f'learner.model="{model}"',
        f"run.rounds={rounds}",
        "runner.timeout_s=1000",
    )
    targets = ["sampler", "executor", "grader", "learner", "nats"]
    plan = sorted((rng.uniform(1, 25), t) for t in [*targets, *rng.sample(targets, 3)])
    while not run_ids(home) and proc.poll() is None:  # the clock starts once the services exist
        time.sleep(0.2)
    started, killed = time.monotonic(), []
    for at, target in plan:
        while time.monotonic() - started < at and proc.poll() is None:
            time.sleep(0.2)
        pid = _pid_of(home, target)
        if proc.poll() is not None:
            break
        if pid:
            try:
                os.kill(pid, signal.SIGKILL)
                killed.append(target)
            except ProcessLookupError:
                pass
    assert proc.wait(1000) == 0, (home / "run.log").read_text()[-6000:]
    assert len(set(killed)) >= 4, f"the run ended before the kills: {killed}"
    (run_id,) = run_ids(home)
    log = read_log(home, run_id)
    n = tasks * rounds * e * g
    assert log.counts[Kind.NODE_SAMPLED] == n and len(set(log.node_ids)) == n
    assert log.counts[Kind.NODE_EXECUTED] == n and log.counts[Kind.NODE_GRADED] == n
    assert len(log.groups_scored) == len(set(log.groups_scored)) == tasks * rounds * e
    assert len(log.groups_trained) == len(set(log.groups_trained))  # trained at most once
    records = export_records(home / "runs" / run_id / "export")
    assert len(records) == n and len({r["id"] for r in records}) == n
    print(f"killed {killed}; {n} nodes, {len(log.steps)} learner steps")
