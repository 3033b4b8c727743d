"""The runner's supervisor restarts services that died, and kills and restarts ones that are stuck:
alive, but their own heartbeat went stale (real child processes, no network).

Imports a private module: `treegrpo.runner._supervisor` (what these tests exercise is not on the
package's public surface).
"""

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
    proc = Proc(
        "svc",
        [sys.executable, "-c", BEAT, str(health), str(age)],
        tmp_path / "logs" / "svc.log",
        {"PYTHONPATH": str(ROOT)},
        health,
    )
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


FAILED_SETUP = """
import os, sys
from treegrpo.health import Heartbeat, write_heartbeat
write_heartbeat(__import__("pathlib").Path(sys.argv[1]), Heartbeat(
    service="svc", instance="i", pid=os.getpid(), written_at=0, state="failed", nats_connected=False,
    consumer_loop_at=0, inflight=0, processed=0, dead_lettered=0,
    failure="setup failed: FileNotFoundError: no model at /x: build one with treegrpo model init"))
sys.exit(78)
"""


def test_a_permanent_exit_is_not_restarted_and_its_reason_is_kept(tmp_path):
    sup = Supervisor(tmp_path, max_restarts=50)
    health = tmp_path / "health" / "svc.json"
    sup.procs["svc"] = proc = Proc(
        "svc",
        [sys.executable, "-c", FAILED_SETUP, str(health)],
        tmp_path / "logs" / "svc.log",
        {"PYTHONPATH": str(ROOT)},
        health,
    )
    sup.start_all()
    try:
        proc.proc.wait(30)
        notes = sup.check()
        assert proc.restarts == 0 and not proc.alive and sup.gave_up == ["svc"]
        assert "no model at /x" in sup.failures["svc"] and any("failed permanently" in n for n in notes)
        assert sup.check() == []  # and it stays down
    finally:
        sup.stop_all(5)


def test_a_service_piling_up_errors_is_shown_once_per_batch(tmp_path):
    health = tmp_path / "health" / "svc.json"
    code = BEAT.replace(
        "processed=0, dead_lettered=0",
        "processed=0, dead_lettered=0, errors=4, last_error='TransientError: bus down'",
    )
    sup = Supervisor(tmp_path)
    sup.procs["svc"] = Proc(
        "svc",
        [sys.executable, "-c", code, str(health), "0"],
        tmp_path / "logs" / "svc.log",
        {"PYTHONPATH": str(ROOT)},
        health,
    )
    sup.start_all()
    try:
        deadline = time.monotonic() + 20
        notes = []
        while not notes and time.monotonic() < deadline:
            time.sleep(0.1)
            notes = sup.error_notes()
        assert notes == ["svc: 4 errors so far, the last: TransientError: bus down"]
        assert sup.error_notes() == []
    finally:
        sup.stop_all(5)
