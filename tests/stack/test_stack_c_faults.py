"""Faults through the engine, mid-run: `docker compose kill -s SIGKILL` of the learner and of the
executor (each then `docker compose start`ed) and `docker compose restart nats`. The run completes
with exactly its nodes: none lost, none executed, graded or trained twice."""

from __future__ import annotations

import time
from collections import Counter

import pytest

from tests.e2e._harness import export_records, read_log, run_ids
from tests.stack._stack import attached_run, node_outcomes, sampler_backend
from tests.stack.conftest import record
from treegrpo.events import Kind

pytestmark = [pytest.mark.stack, pytest.mark.timeout(1200)]
TASKS, ROUNDS, E, G = 1, 4, 3, 2


def progress(stack, run_id: str):
    """The run's log as it stands, or None while NATS is away (its restart is one of the faults)."""
    try:
        return read_log(None, run_id, url=stack.operator_url)
    except Exception:  # noqa: BLE001 - connection refused / timed out during the restart
        return None


def wait_for(stack, run_id: str, ready, proc, timeout: float = 480):
    """Poll the log until `ready(log)`; the run must still be going (else the fault was not mid-run).
    Generous: after a learner SIGKILL its groups come back only after ack_wait (60 s), behind a cold
    container start, on a 2-core host that may be busy."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, "the run ended before the fault"
        log = progress(stack, run_id)
        if log is not None and ready(log):
            return log
        time.sleep(0.5)
    raise AssertionError(f"the run never reached the fault's moment: {progress(stack, run_id)}")


def started_at(stack, service: str) -> str:
    return stack.inspect(service)["State"]["StartedAt"]


def test_sigkill_of_learner_and_executor_and_a_nats_restart_mid_run_lose_and_duplicate_nothing(
    stack, tmp_path
):
    home = tmp_path / "home"
    n = TASKS * ROUNDS * E * G
    sampler_backend(stack, "replay")  # real scripts: the executor is killed while one runs
    t0 = time.monotonic()
    proc = attached_run(stack, home, f"run.rounds={ROUNDS}", "runner.timeout_s=1000")
    while not run_ids(home):
        assert proc.poll() is None, (home / "run.log").read_text()[-3000:]
        time.sleep(0.2)
    (run_id,) = run_ids(home)
    graded = lambda log: log.counts[Kind.NODE_GRADED]  # noqa: E731
    plan = [  # (what, when: the log shows work of the target's in flight)
        ("learner", lambda log: graded(log) >= 6 and log.counts[Kind.GROUP_SCORED] > len(log.groups_trained)),
        (
            "executor",
            lambda log: graded(log) >= 12 and log.counts[Kind.NODE_SAMPLED] > log.counts[Kind.NODE_EXECUTED],
        ),
        ("nats", lambda log: graded(log) >= 18),
    ]
    trials = []
    for target, ready in plan:
        log = wait_for(stack, run_id, ready, proc)
        before = started_at(stack, target)
        if target == "nats":
            stack.compose("restart", "nats", timeout=180)
        else:
            stack.compose("kill", "-s", "SIGKILL", target, timeout=60)
            time.sleep(2)
            stack.compose("start", target, timeout=300)
        assert started_at(stack, target) != before, f"{target} was not restarted"
        trials.append(
            {
                "target": target,
                "at_graded": graded(log),
                "of": n,
                "in_flight_sampled": log.counts[Kind.NODE_SAMPLED] - log.counts[Kind.NODE_EXECUTED],
            }
        )
        print(f"fault {target}: at {graded(log)}/{n} graded")
    assert proc.wait(1000) == 0, (home / "run.log").read_text()[-5000:]
    wall = time.monotonic() - t0

    log = read_log(home, run_id, url=stack.operator_url)
    assert log.counts[Kind.NODE_SAMPLED] == len(set(log.node_ids)) == n
    assert log.counts[Kind.NODE_EXECUTED] == log.counts[Kind.NODE_GRADED] == n
    assert len(log.groups_scored) == len(set(log.groups_scored)) == TASKS * ROUNDS * E
    assert len(log.groups_trained) == len(set(log.groups_trained))  # trained at most once
    assert log.counts[Kind.RUN_COMPLETED] == 1
    records = export_records(home / "runs" / run_id / "export")
    assert len(records) == n and len({r["id"] for r in records}) == n
    # the replay scripts really ran in the containerised sandbox, some to a valid submission
    statuses = Counter(o.status for o in node_outcomes(stack.operator_url, run_id))
    assert sum(statuses.values()) == n and statuses["ok"] > 0, statuses
    stack.wait_healthy(timeout=180)  # every restarted container is healthy again
    record(
        "fault_trials",
        {
            "run_nodes": n,
            "wall_s": round(wall, 1),
            "trials": trials,
            "learner_steps": len(log.steps),
            "statuses": dict(statuses),
        },
    )
    print(f"{len(trials)} faults mid-run; {n} nodes, {len(log.steps)} learner steps, {wall:.0f}s")
