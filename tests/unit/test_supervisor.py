"""The runner's supervisor restarts services that died, and kills and restarts ones that are stuck:
alive, but their own heartbeat went stale (real child processes, no network)."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

from treegrpo.runner._supervisor import Proc, Supervisor

pytestmark = pytest.mark.timeout(60)
ROOT = Path(__file__).resolve().parents[2]

BEAT = """
import os, sys, time
from treegrpo.health import Heartbeat, write_heartbeat
path, age = sys.argv[1], float(sys.argv[2])
while True:  # age > 0: a loop that beat once long ago and then blocked; age 0: a healthy loop
    t = time.time() - age
    write_heartbeat(__import__("pathlib").Path(path), Heartbeat(
        service="svc", instance="i", pid=os.getpid(), written_at=t, state="running", nats_connected=True,
        consumer_loop_at=t, inflight=0, processed=0, dead_lettered=0))
    time.sleep(60 if age else 0.1)
"""


def supervised(tmp_path: Path, age: float, stuck_after_s: float = 5.0) -> tuple[Supervisor, Proc]:
    sup = Supervisor(tmp_path, max_restarts=3, stuck_after_s=stuck_after_s)
    health = tmp_path / "health" / "svc.json"
    proc = Proc("svc", [sys.executable, "-c", BEAT, str(health), str(age)], tmp_path / "logs" / "svc.log",
                {"PYTHONPATH": str(ROOT)}, health)
    sup.procs["svc"] = proc
    sup.start_all()
    deadline = time.monotonic() + 20
    while not health.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.3)
    return sup, proc


def test_a_service_whose_heartbeat_went_stale_is_killed_and_restarted(tmp_path):
    sup, proc = supervised(tmp_path, age=600)
    first = proc.proc.pid
    try:
        notes = sup.check()
        assert any("stuck" in n and "old" in n for n in notes), notes
        assert proc.restarts == 1 and proc.alive and proc.proc.pid != first
    finally:
        sup.stop_all(5)


def test_a_healthy_service_and_one_with_the_check_off_are_left_alone(tmp_path):
    sup, proc = supervised(tmp_path / "a", age=0)
    off, proc_off = supervised(tmp_path / "b", age=600, stuck_after_s=0)
    try:
        time.sleep(0.5)
        assert sup.check() == [] and off.check() == []
        assert proc.restarts == 0 and proc_off.restarts == 0
    finally:
        sup.stop_all(5)
        off.stop_all(5)


def test_the_progress_line_shows_each_service_heartbeat_state(tmp_path):
    sup, proc = supervised(tmp_path, age=0, stuck_after_s=0)
    try:
        assert sup.state(proc) == "running, 0 handled"
        sup.stop_all(5)
        assert sup.state(proc) == "exited"
    finally:
        sup.stop_all(5)
