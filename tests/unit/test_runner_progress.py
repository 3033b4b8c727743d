"""The run's live progress, folded from its events."""

from __future__ import annotations

import pytest

from treegrpo import events
from treegrpo.runner import Progress
from treegrpo.v1 import events_pb2 as pb

pytestmark = pytest.mark.timeout(30)


def test_a_rounds_best_comes_from_its_graded_nodes_when_round_completed_is_the_fact_alone():
    p = Progress(tasks=["t"], rounds=2, train=False)
    for i, (oriented, status) in enumerate([(0.2, "ok"), (0.9, "crashed"), (0.5, "ok")]):
        g = pb.NodeGraded(
            node_id=f"n{i}", task="t", round=1, status=status, oriented=oriented, test_metric=oriented * 10
        )
        p.apply(events.make_event("r", "grader", g))
    later = pb.NodeGraded(node_id="n9", task="t", round=2, status="ok", oriented=7.0, test_metric=70.0)
    p.apply(events.make_event("r", "grader", later))
    assert p.per_task["t"].best is None  # no round has completed yet
    p.apply(events.make_event("r", "sampler", pb.RoundCompleted(task="t", round=1, completed_unix=1)))
    assert (p.per_task["t"].best, p.per_task["t"].rounds_done) == (5.0, 1)


def test_masked_nodes_and_dropped_groups_are_counted_apart_on_screen():
    from rich.console import Console

    p = Progress(tasks=["t"], rounds=1, train=True)
    for i, status in enumerate(["ok", "crashed", "infrastructure", "infrastructure"]):
        p.apply(
            events.make_event("r", "grader", pb.NodeGraded(node_id=f"n{i}", task="t", round=1, status=status))
        )
    dropped = pb.GroupScored(sibling_group="g1", task="t", round=1)
    for status in ("ok", "infrastructure", "infrastructure"):
        dropped.members.add(node_id=status, status=status)
    p.apply(events.make_event("r", "grader", dropped))
    assert p.groups_dropped == 1
    console = Console(width=200, record=True)
    console.print(p.table())
    screen = console.export_text()
    assert "1 dropped (infrastructure)" in " ".join(screen.split())
    header = next(ln for ln in screen.splitlines() if ln.startswith("┃ task"))
    row = next(ln for ln in screen.splitlines() if ln.startswith("│ t "))
    cells = [c.strip() for c in row.split("│")[1:-1]]
    names = [c.strip() for c in header.split("┃")[1:-1]]
    assert dict(zip(names, cells, strict=True))["infra"] == "2"
    assert dict(zip(names, cells, strict=True))["other"] == "0"


def test_a_learner_restore_that_lost_state_is_one_screen_line_and_a_clean_one_or_a_past_one_is_none():
    p = Progress(tasks=["t"], rounds=2, train=True)
    lost = pb.LearnerRestored(
        version=3,
        weights_from="published",
        adapter_version=3,
        adapter_sha256="ab" * 32,
        skipped=["step_000003: trainer.pt has 10 bytes, the manifest says 20 (truncated?)"],
        lost=["optimizer state (AdamW moments, RNG): reset at version 3"],
        restore=1,
    )
    clean = pb.LearnerRestored(version=4, weights_from="checkpoint", checkpoint="step_000004", restore=2)
    past = pb.LearnerRestored(version=1, weights_from="replay", lost=["x"], restore=3)
    for body, at in ((lost, None), (clean, None), (past, p.started - 60)):
        p.apply(events.make_event("r", "learner", body, at=at))
    (line,) = p.take_notices()
    assert line.startswith("learner restored version 3 from published adapter v3 (sha256 abababababab…)")
    assert "skipped: step_000003: trainer.pt has 10 bytes" in line
    assert "lost: optimizer state (AdamW moments, RNG): reset at version 3" in line
    assert p.take_notices() == []  # shown once


def test_executions_without_their_grade_yet_are_counted_as_ungraded_every_attempt_once():
    p = Progress(tasks=["t"], rounds=1, train=True)
    for node, attempt in [("a", 0), ("b", 0), ("a", 2)]:
        executed = pb.NodeExecuted(node_id=node, task="t", round=1, status="infrastructure", attempt=attempt)
        p.apply(events.make_event("r", "executor", executed))
    assert p.ungraded == 3
    graded = pb.NodeGraded(node_id="a", task="t", round=1, status="infrastructure")
    p.apply(events.make_event("r", "grader", graded))
    assert p.ungraded == 2
    retry = pb.NodeGraded(node_id="a", task="t", round=1, status="ok", attempt=2)
    p.apply(events.make_event("r", "grader", retry))
    assert p.ungraded == 1
