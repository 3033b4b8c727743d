"""Masked nodes (status `infrastructure`) are counted apart: the seed-format export keeps the seed's
six statuses (masked nodes are left out of the node files and the round summary, and counted in
the export's result), the report shows them beside the six statuses, and their groups still count
as complete groups for the learning-signal share."""

from __future__ import annotations

import json

import pytest

from treegrpo import events
from treegrpo.archive import STATUSES, export_runs
from treegrpo.events import INFRASTRUCTURE
from treegrpo.report import build_report
from treegrpo.v1 import events_pb2 as pb

pytestmark = pytest.mark.timeout(60)
RUN, TASK = "masked1", "t"
# two groups of 3: one with a masked sibling (trains on the other two), one left with a single
# sibling (dropped)
GROUPS = {
    0: [("ok", 0.5), ("ok", 0.9), (INFRASTRUCTURE, None)],
    1: [("ok", 0.5), (INFRASTRUCTURE, None), (INFRASTRUCTURE, None)],
}


def _events() -> list[pb.Event]:
    out = [
        events.make_event(
            RUN, "sampler", pb.RoundStarted(task=TASK, round=1, started_unix=1700000000), at=1.0
        )
    ]
    for step, members in GROUPS.items():
        gid = events.group_id(RUN, TASK, 1, step)
        scored = pb.GroupScored(sibling_group=gid, task=TASK, round=1, step=step)
        valid = [o for s, o in members if s == "ok"]
        for i, (status, oriented) in enumerate(members):
            nid = events.node_id(RUN, TASK, 1, step, i)
            common = dict(
                node_id=nid, task=TASK, round=1, step=step, sibling_group=gid, group_size=3, mode="draft"
            )
            out.append(events.make_event(RUN, "sampler", pb.NodeSampled(**common, index_in_group=i), at=2.0))
            out.append(events.make_event(RUN, "executor", pb.NodeExecuted(**common, status=status), at=3.0))
            g = pb.NodeGraded(**common, status=status, is_buggy=False, source="grade" if oriented else "none")
            if oriented is not None:
                g.test_metric = g.oriented = oriented
            else:
                g.grade_error = "executing it failed on our side after 3 attempt(s): SandboxError: boom"
            out.append(events.make_event(RUN, "grader", g, at=4.0))
            reward = 0.0 if oriented is None else (0.4 if oriented == min(valid) else 0.6)
            scored.members.add(node_id=nid, reward=reward, status=status)
        out.append(events.make_event(RUN, "grader", scored, at=5.0))
    out.append(
        events.make_event(
            RUN, "sampler", pb.RoundCompleted(task=TASK, round=1, completed_unix=1700000100), at=6.0
        )
    )
    return out


async def test_export_leaves_masked_nodes_out_and_says_how_many(bus, tmp_path):
    await bus.publish_many(_events())
    [res] = await export_runs(bus, [RUN], tmp_path)
    assert (res.nodes, res.infrastructure_skipped, res.ungraded_skipped, res.violations) == (3, 3, 0, [])
    rdir = tmp_path / RUN / "round_1"
    rows = [json.loads(x) for x in (rdir / f"{TASK}__1700000000.jsonl").read_text().splitlines()]
    assert {r["status"] for r in rows} <= set(STATUSES) and len(rows) == 3
    summary = json.loads(next(rdir.glob("*summary*")).read_text())
    assert (summary["nodes"], summary["valid"]) == (3, 3)


async def test_the_report_counts_masked_nodes_beside_the_six_statuses(bus, tmp_path):
    await bus.publish_many(_events())
    report = await build_report(bus, [RUN], tmp_path / "report")
    [m] = report.runs
    assert m.nodes == 3 and m.infrastructure == 3 and INFRASTRUCTURE not in m.statuses
    assert m.crash_rate == 0.0 and m.valid_rate == 1.0
    # group 0 lost one sibling and is complete on the other two; group 1 kept one: dropped
    assert (m.signal.groups, m.signal.partial_groups, m.signal.dropped_groups) == (1, 0, 1)
    md = (tmp_path / "report" / "report.md").read_text()
    assert "infrastructure (masked, not in nodes)" in md and "groups dropped: infrastructure" in md
