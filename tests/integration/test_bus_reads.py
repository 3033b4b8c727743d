"""The bus's read verbs on a real nats-server, and what reading costs (`Bus.reads`): the facts
of many keys are one request (a batched direct get); a trained group's members are one request,
not one lookup per sibling (was 16 for a group of 16); opening a trained run reads its log in one
replay (was three) and finishes its tail from what that replay read (was one lookup more).

The learner's two tests are about its private modules (`_buffer.read_members`, `_restore.Restorer`):
the counts are theirs, and no public name reaches them without a model and a trainer.

Imports a private module: `treegrpo_learner._buffer`, `treegrpo_learner._restore` (what these tests
exercise is not on the package's public surface).
"""

from __future__ import annotations

import asyncio

import pytest

from tests.learner_events import run_spec, scored_group, start_run
from treegrpo import events
from treegrpo.bus import Reads
from treegrpo.events import Kind
from treegrpo.v1 import events_pb2 as pb

pytestmark = pytest.mark.timeout(60)


def sampled(run: str, node: str, code: str) -> pb.Event:
    return events.make_event(run, "sampler", pb.NodeSampled(node_id=node, code=code, sibling_group="g"))


async def test_last_events_reads_the_fact_of_each_key_in_one_request_and_the_first_fact_stands(bus):
    await bus.publish_many([sampled("r1", f"n{i}", f"print({i})") for i in range(6)])
    await bus.publish(sampled("r2", "n1", "another run"))
    # a later message with other content on n2's subject, not under its own id: not the fact
    newer = sampled("r1", "n2", "print('again')")
    await bus.publish_raw(events.subject_of(newer), events.encode(newer))
    bus.reads = Reads()
    found = await bus.last_events("r1", Kind.NODE_SAMPLED, ["n0", "n1", "n2", "n5", "gone"])
    assert {k: e.node_sampled.code for k, e in found.items()} == {
        "n0": "print(0)",
        "n1": "print(1)",
        "n2": "print(2)",
        "n5": "print(5)",
    }
    assert bus.reads == Reads(lookups=1, batches=1, messages=4)  # n2's first fact: one direct get
    assert await bus.last_events("r1", Kind.NODE_SAMPLED, []) == {}
    assert await bus.last_events("r1", Kind.NODE_SAMPLED, ["gone", "also-gone"]) == {}
    assert bus.reads.total == 3  # no keys: no request; keys of which none has a fact: one
    many = [f"m{i:03d}" for i in range(300)]  # more keys than one batched request takes
    await bus.publish_many([sampled("r3", k, k) for k in many])
    bus.reads = Reads()
    assert {
        k: e.node_sampled.code for k, e in (await bus.last_events("r3", Kind.NODE_SAMPLED, many)).items()
    } == {k: k for k in many}
    assert bus.reads == Reads(batches=2, messages=300)


async def test_a_trained_groups_members_are_one_request_not_one_lookup_per_sibling(bus):
    from treegrpo_learner._buffer import read_members

    group = await scored_group(bus, "g1", "t", 1, 0, [0.1 * i for i in range(16)], vocab=320)
    gs = (await bus.last_event("g1", Kind.GROUP_SCORED, group)).group_scored
    bus.reads = Reads()
    members = await read_members(bus, "g1", gs)
    assert bus.reads == Reads(batches=1, messages=16)  # was Reads(lookups=16)
    assert [m.node_id for m in members] == [m.node_id for m in gs.members]
    assert [m.reward for m in members] == pytest.approx([0.1 * i for i in range(16)])
    one = (await bus.last_event("g1", Kind.NODE_SAMPLED, members[3].node_id)).node_sampled
    assert members[3].response_ids == tuple(one.response_token_ids) and members[3].prompt_ids


async def test_opening_a_trained_run_reads_its_log_in_one_replay(bus, tmp_path):
    from treegrpo_learner._restore import Restorer

    groups = [await scored_group(bus, "o1", "t", 1, s, [1.0, 0.0, 0.5, 0.2], vocab=320) for s in range(3)]
    steps = [
        pb.LearnerStepped(step=1, policy_version=1, sibling_groups=groups[:2], last_stream_seq=10),
        pb.LearnerStepped(step=2, policy_version=2, sibling_groups=groups[2:], last_stream_seq=15),
    ]
    earlier = pb.LearnerRestored(version=1, restore=1, weights_from="replay", replayed_steps=1)
    await bus.publish_many([events.make_event("o1", "learner", b) for b in [*steps, earlier]])
    restorer = Restorer(bus, "o1", "learner", None, tmp_path / "ckpt")  # nothing to load: no trainer
    bus.reads = Reads()
    restored = await restorer.restore()
    assert bus.reads == Reads(lookups=0, consumers=1, fetches=1, messages=3)  # was 3 replays
    assert [r.step for r in restored.retrain] == [1, 2] and restored.state.step == 0
    assert (restored.fact.version, restored.fact.restore, restored.fact.weights_from) == (2, 2, "replay")
    bus.reads = Reads()
    batch = await restorer.batch(restored.retrain[0])
    assert [g.group for g in batch.groups] == groups[:2] and len(batch.groups[1].members) == 4
    # per group: its group.scored by key, its members in one batched request
    assert bus.reads == Reads(lookups=2, batches=2, messages=8)
    restored.state.step = 2  # as if both steps were re-trained: the log has learner.step 2
    bus.reads = Reads()
    await restorer.finish_tail(restored.state, restored, upload=None, publisher=None)
    assert bus.reads.total == 0  # its learner.step is in what the replay read (was one lookup)


async def test_follow_hands_out_a_runs_events_live_from_its_first_and_ends_on_stop(bus):
    await bus.publish(sampled("f1", "n0", "before"))
    stop, seen, bad = asyncio.Event(), [], []

    async def follow() -> None:
        async for event in bus.follow("f1", stop, on_undecodable=lambda s, e: bad.append(s), poll_s=0.1):
            seen.append(event.node_sampled.code)
            if len(seen) == 2:
                stop.set()

    task = asyncio.create_task(follow())
    await asyncio.sleep(0.3)
    await bus.publish(sampled("f2", "n0", "another run"))
    await bus.publish_raw("tg.f1.node.sampled.junk", b"not an event")
    await bus.publish(sampled("f1", "n1", "after"))
    await asyncio.wait_for(task, 10)
    assert seen == ["before", "after"] and bad == ["tg.f1.node.sampled.junk"]
    with pytest.raises(ValueError):
        await anext(bus.follow("f1.>"))  # one run's events, never a pattern's


async def test_run_start_and_subjects_answer_from_the_log(bus):
    assert await bus.run_start("s1") is None
    await start_run(bus, run_spec("s1", ["t"], expansions=2, group_size=4))
    await bus.publish_many([sampled("s1", f"n{i}", "x") for i in range(3)])
    start = await bus.run_start("s1")
    assert start.spec.tree.expansions == 2 and start.producer == "test/cli" and not start.imported
    bus.reads = Reads()
    subjects = await bus.subjects("s1", Kind.NODE_SAMPLED)
    assert subjects == {events.subject("s1", Kind.NODE_SAMPLED, f"n{i}"): 1 for i in range(3)}
    assert set(await bus.subjects("s1")) == {*subjects, "tg.s1.run.started"}
    assert bus.reads == Reads(infos=2)
    assert await bus.run_ids() == ["s1"] and (await bus.run_ends("s1")).open
