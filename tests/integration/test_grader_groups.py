"""A group of the contract's ids is completed with one request for the siblings memory lacks (was
one lookup per sibling); one whose ids are not the contract's (an imported run's) from one index of
the run's node.graded facts, each fact read once: O(N) for the run, where it was one whole replay
per node (O(N²)). About the grader's private `_groups` module (its counts are the point), on a real
nats-server.

Imports a private module: `treegrpo_grader._groups` (what these tests exercise is not on the package's
public surface).
"""

from __future__ import annotations

import pytest

from treegrpo import events
from treegrpo.bus import Reads
from treegrpo.v1 import events_pb2 as pb
from treegrpo_grader import Shaping

pytestmark = pytest.mark.timeout(60)

GROUPS, SIZE = 12, 16


def graded(group: int, index: int) -> pb.NodeGraded:
    return pb.NodeGraded(
        node_id=f"imported-{group:02d}-{index:02d}",  # not events.node_id: found by group, not by id
        sibling_group=f"group{group:02d}",
        task="t",
        round=1,
        step=group,
        group_size=SIZE,
        status="ok",
        oriented=float(index),
    )


async def test_an_imported_runs_groups_complete_with_each_graded_fact_read_once(bus):
    from treegrpo_grader._groups import GroupTracker

    # siblings of all groups interleaved on the stream, as several executors finish them
    facts = [graded(g, i) for i in range(SIZE) for g in range(GROUPS)]
    await bus.publish_many([events.make_event("imp", "archive-import", f) for f in facts])
    tracker = GroupTracker(bus, Shaping())
    bus.reads = Reads()
    scored = {}
    for f in facts:
        fact = await tracker.on_graded("imp", f)
        if fact is not None:
            tracker.mark_scored("imp", fact.sibling_group)
            scored[fact.sibling_group] = fact
    assert sorted(scored) == [f"group{g:02d}" for g in range(GROUPS)]
    for name, fact in scored.items():
        assert [m.node_id for m in fact.members] == [f"imported-{name[-2:]}-{i:02d}" for i in range(SIZE)]
    n = len(facts)
    assert bus.reads.messages == n  # each node.graded read once (one replay per node read them all: n*n)
    assert bus.reads.consumers <= n and bus.reads.lookups == 0
    # a group scored is forgotten by the index; a late redelivery of one of its nodes scores nothing
    assert await tracker.on_graded("imp", facts[0]) is None


async def test_a_restarted_grader_completes_a_group_of_the_contracts_ids_in_one_request(bus):
    from treegrpo_grader._groups import GroupTracker

    group = events.group_id("ct", "t", 1, 0)
    facts = [
        pb.NodeGraded(
            node_id=events.node_id("ct", "t", 1, 0, i),
            sibling_group=group,
            task="t",
            round=1,
            step=0,
            group_size=SIZE,
            status="ok",
            oriented=float(i),
        )
        for i in range(SIZE)
    ]
    await bus.publish_many([events.make_event("ct", "grader", f) for f in facts[:-1]])
    tracker = GroupTracker(bus, Shaping())  # nothing in memory: every sibling is on the stream
    bus.reads = Reads()
    fact = await tracker.on_graded("ct", facts[-1])
    assert [m.node_id for m in fact.members] == [f.node_id for f in facts]
    assert bus.reads == Reads(batches=1, messages=SIZE - 1)  # was 15 lookups, one after another
    bus.reads = Reads()
    assert await GroupTracker(bus, Shaping()).on_graded("ct", facts[0]) is None  # the last is still out
    assert bus.reads == Reads(batches=1, messages=SIZE - 2)
