"""A run whose service failed permanently ends once what was executed is graded (a private module:
`treegrpo.runner._loop.Loop.settled` is what holds the end back; the e2e proof is
tests/e2e/test_infrastructure_run.py)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from treegrpo import events
from treegrpo.runner import Progress, _loop
from treegrpo.v1 import events_pb2 as pb

pytestmark = pytest.mark.timeout(10)


def _loop_after(failed: str, progress: Progress, clock: list[float], monkeypatch) -> _loop.Loop:
    monkeypatch.setattr(_loop, "time", SimpleNamespace(time=lambda: clock[0]))
    sup = SimpleNamespace(failures={failed: "the executor cannot run scripts"})
    return _loop.Loop(rf=None, sup=sup, nats=None, faults=None, progress=progress, console=None)


def _executed(progress: Progress, node: str) -> None:
    body = pb.NodeExecuted(node_id=node, task="t", round=1, status="infrastructure")
    progress.apply(events.make_event("r", "executor", body))


def test_a_failed_run_waits_for_the_grade_of_the_failed_executors_last_node(monkeypatch):
    progress, clock = Progress(tasks=["t"], rounds=1, train=True), [100.0]
    loop = _loop_after("executor", progress, clock, monkeypatch)
    assert not loop.settled()  # the watcher may not have the executor's last facts yet
    _executed(progress, "n3")
    clock[0] += 1.5
    assert not loop.settled()  # executed, not graded: the grader is on it
    progress.apply(events.make_event("r", "grader", pb.NodeGraded(node_id="n3", task="t", round=1)))
    assert loop.settled()


def test_a_failed_run_ends_after_the_settle_time_even_if_grades_never_come(monkeypatch):
    progress, clock = Progress(tasks=["t"], rounds=1, train=True), [100.0]
    loop = _loop_after("executor", progress, clock, monkeypatch)
    _executed(progress, "n1")
    assert not loop.settled()
    clock[0] += _loop.SETTLE_S + 0.1
    assert loop.settled()


def test_a_failed_grader_ends_the_run_at_once_since_nothing_else_grades(monkeypatch):
    progress, clock = Progress(tasks=["t"], rounds=1, train=True), [100.0]
    loop = _loop_after("grader", progress, clock, monkeypatch)
    _executed(progress, "n1")
    assert loop.settled()
