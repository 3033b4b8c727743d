"""Heartbeat verdicts: what the liveness and readiness probes call unhealthy (no network)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from treegrpo.health import Heartbeat, check_files, problems, read_heartbeat, write_heartbeat

pytestmark = pytest.mark.timeout(30)
NOW = 1_000_000.0


def beat(**kw) -> Heartbeat:
    base = dict(
        service="grader",
        instance="h-1",
        pid=os.getpid(),
        written_at=NOW - 2,
        state="running",
        nats_connected=True,
        consumer_loop_at=NOW - 1,
        inflight=0,
        processed=5,
        dead_lettered=0,
    )
    return Heartbeat(**{**base, **kw})


def test_a_fresh_heartbeat_of_a_turning_loop_is_live_and_ready():
    assert problems(beat(), 60, ready=True, now=NOW) == []


def test_a_stale_heartbeat_means_a_blocked_event_loop():
    (why,) = problems(beat(written_at=NOW - 300, consumer_loop_at=NOW - 300), 60, now=NOW)[:1]
    assert "300s old" in why and "blocked" in why


def test_a_consumer_loop_that_stopped_turning_fails_liveness_though_the_event_loop_runs():
    assert any("consumer loop" in p for p in problems(beat(consumer_loop_at=NOW - 200), 60, now=NOW))


def test_a_stopped_service_or_a_dead_pid_is_unhealthy():
    assert problems(beat(state="stopped"), 60, now=NOW) == ["grader is stopped"]
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    assert any("is gone" in p for p in problems(beat(pid=gone.pid), 60, now=NOW))


def test_a_nats_outage_fails_readiness_but_not_liveness():
    down = beat(nats_connected=False)
    assert problems(down, 60, now=NOW) == []
    assert problems(down, 60, ready=True, now=NOW) == ["grader is not connected to NATS"]


def test_heartbeat_files_round_trip_and_a_missing_or_torn_one_is_a_problem(tmp_path):
    path = tmp_path / "health" / "grader.json"
    write_heartbeat(path, beat())
    assert read_heartbeat(path) == beat()
    assert [p.name for p in path.parent.iterdir()] == ["grader.json"]  # no temp file left
    torn = tmp_path / "torn.json"
    torn.write_text('{"service": "gra')
    assert "cannot read heartbeat" in check_files([torn], 60, False)[0]
    assert "no heartbeat file" in check_files([], 60, False)[0]


def test_a_loading_or_draining_service_is_alive_but_not_ready():
    for state in ("starting", "stopping"):
        assert problems(beat(state=state, consumer_loop_at=0.0), 60, now=NOW) == []
        assert problems(beat(state=state), 60, ready=True, now=NOW) == [f"grader is {state}"]
