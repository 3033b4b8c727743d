"""The facts the grader builds: what node.graded copies, what group.scored holds.

Imports a private module: `treegrpo_grader._groups` (what these tests exercise is not on the package's
public surface).
"""

from __future__ import annotations

from treegrpo import events
from treegrpo.tasks import GradeResult
from treegrpo.v1 import events_pb2 as pb
from treegrpo_grader._groups import build_group_scored, sibling_ids
from treegrpo_grader.rewards import Shaping
from treegrpo_grader.service import apply_result, graded_from_executed


def executed(status: str = "ok") -> pb.NodeExecuted:
    return pb.NodeExecuted(
        node_id="abc123abc123",
        task="spooky-mini",
        round=2,
        step=3,
        sibling_group="g1",
        group_size=4,
        mode="improve",
        parent_id="p00000000000",
        status=status,
        exec_time=12.5,
    )


def test_graded_fact_copies_placement_timing_mode_and_parent():
    g = graded_from_executed(executed("timeout"))
    assert (g.node_id, g.task, g.round, g.step, g.sibling_group, g.group_size) == (
        "abc123abc123",
        "spooky-mini",
        2,
        3,
        "g1",
        4,
    )
    assert (g.exec_time, g.mode, g.parent_id) == (12.5, "improve", "p00000000000")
    assert g.status == "timeout" and g.is_buggy and g.source == "none" and not g.HasField("test_metric")


def test_graded_fact_without_parent_has_no_parent():
    ex = executed()
    ex.ClearField("parent_id")
    assert not graded_from_executed(ex).HasField("parent_id")


def test_grade_results_set_status_scores_and_reason():
    ok = apply_result(graded_from_executed(executed()), GradeResult("ok", 0.61234, -0.61234, None, 0.01))
    assert (ok.status, ok.is_buggy, ok.test_metric, ok.oriented, ok.source) == (
        "ok",
        False,
        0.61234,
        -0.61234,
        "grade",
    )
    bad = apply_result(
        graded_from_executed(executed()), GradeResult("invalid_submission", None, None, "NaN", 0.0)
    )
    assert (bad.status, bad.is_buggy, bad.grade_error, bad.source) == (
        "invalid_submission",
        True,
        "NaN",
        "none",
    )


def test_group_fact_lists_members_in_order_with_rewards_and_oriented():
    members = []
    for i, (status, oriented) in enumerate(
        [("ok", -0.5), ("crashed", None), ("ok", -0.7), ("no_code", None)]
    ):
        m = pb.NodeGraded(
            node_id=f"n{i}", task="t", round=1, step=0, sibling_group="g", group_size=4, status=status
        )
        if oriented is not None:
            m.oriented = oriented
        members.append(m)
    scored = build_group_scored(members[0], members, Shaping(temperature=0.5))
    assert [m.node_id for m in scored.members] == ["n0", "n1", "n2", "n3"]
    assert [m.status for m in scored.members] == ["ok", "crashed", "ok", "no_code"]
    r = [m.reward for m in scored.members]
    assert r[0] > 0.5 > r[2] > 0 and r[1] == r[3] == -0.5
    assert scored.members[0].oriented == -0.5 and not scored.members[1].HasField("oriented")
    assert (scored.sibling_group, scored.task, scored.round, scored.step, scored.partial) == (
        "g",
        "t",
        1,
        0,
        False,
    )


def test_sibling_ids_are_the_contracts_node_ids():
    g = pb.NodeGraded(task="spooky-mini", round=1, step=2, group_size=3)
    assert sibling_ids("r9", g) == [events.node_id("r9", "spooky-mini", 1, 2, i) for i in range(3)]
