"""The bus's read verbs on a real nats-server, and what reading costs (`Bus.reads`): the facts
of many keys are one request (a batched direct get); a trained group's members are one request,
not one lookup per sibling (was 16 for a group of 16); opening a trained run reads its log in one
replay (was three) and finishes its tail from what that replay read (was one lookup more).

A node's training payload (prompt, token ids, logprobs) is a `tokens.recorded` fact of its own: the
executor's consumer and the grader's lookup read `node.sampled` without it (bytes per node
before/after below), and the learner reads a group's node facts and their payloads in one request.

The learner's tests are about its private modules (`_buffer.read_members`, `_restore.Restorer`),
and the bytes test builds a group's facts with the sampler's `_expand.node_events`
(tests/node_payload.py): the counts are theirs, and no public name reaches them without a model,
a trainer or a backend.

Imports a private module: `treegrpo_learner._buffer`, `treegrpo_learner._restore`,
`treegrpo_sampler._expand`, `treegrpo_sampler._state` (what these tests exercise is not on the
packages' public surfaces).
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
    # one request for the 16 node facts and their 16 payloads (was Reads(lookups=16))
    assert bus.reads == Reads(batches=1, messages=32)
    assert [m.node_id for m in members] == [m.node_id for m in gs.members]
    assert [m.reward for m in members] == pytest.approx([0.1 * i for i in range(16)])
    one = (await bus.last_event("g1", Kind.TOKENS_RECORDED, members[3].node_id)).tokens_recorded
    assert members[3].response_ids == tuple(one.response_token_ids) and members[3].prompt_ids


async def test_a_group_recorded_with_its_payload_inline_still_trains_from_one_request(bus):
    from treegrpo_learner._buffer import read_members

    rewards = [0.1 * i for i in range(8)]
    inline = await scored_group(bus, "old", "t", 1, 0, rewards, vocab=320, inline=True)
    apart = await scored_group(bus, "new", "t", 1, 0, rewards, vocab=320)
    gs_old = (await bus.last_event("old", Kind.GROUP_SCORED, inline)).group_scored
    gs_new = (await bus.last_event("new", Kind.GROUP_SCORED, apart)).group_scored
    bus.reads = Reads()
    old = await read_members(bus, "old", gs_old)
    assert bus.reads == Reads(batches=1, messages=8)  # node facts only: no payload fact to find
    one = (await bus.last_event("old", Kind.NODE_SAMPLED, old[2].node_id)).node_sampled
    assert not one.tokens_recorded and old[2].response_ids == tuple(one.response_token_ids)
    assert old[2].prompt_ids == tuple(one.prompt_token_ids) and old[2].behaviour_logprobs
    new = await read_members(bus, "new", gs_new)
    assert [len(m.response_ids) for m in old] == [len(m.response_ids) for m in new]
    assert all(m.response_ids for m in old)


async def test_a_payload_fact_missing_is_waited_for_and_one_for_an_inline_node_is_never_read(bus):
    from treegrpo.bus import TransientError
    from treegrpo_learner._buffer import read_members

    group = await scored_group(bus, "w1", "t", 1, 0, [1.0, 0.0], vocab=320, inline=True)
    gs = (await bus.last_event("w1", Kind.GROUP_SCORED, group)).group_scored
    node = gs.members[0].node_id
    forged = pb.TokensRecorded(node_id=node, response_token_ids=[7, 7, 7], response_logprobs=[0.0] * 3)
    await bus.publish(events.make_event("w1", "fuzz", forged))
    members = await read_members(bus, "w1", gs)
    assert members[0].response_ids != (7, 7, 7)  # the node fact holds its payload: that one stands
    # a node fact that says its payload is apart, whose payload is not on the stream (yet)
    body = pb.NodeSampled(node_id="n0", sibling_group="g", tokens_recorded=True)
    await bus.publish(events.make_event("w2", "sampler", body))
    lone = pb.GroupScored(sibling_group="g", members=[pb.GroupMember(node_id="n0", status="ok")])
    with pytest.raises(TransientError, match="tokens.recorded of n0"):
        await read_members(bus, "w2", lone)
    # its payload came, but another sampling's (the server kept the first of two): masked, not trained
    body.tokens_digest = events.tokens_digest(pb.TokensRecorded(node_id="n0", response_token_ids=[6]))
    first = pb.TokensRecorded(node_id="n0", response_token_ids=[5])
    await bus.publish_many([events.make_event("w3", "sampler", b) for b in (first, body)])
    (masked,) = await read_members(bus, "w3", lone)
    assert masked.status == events.INFRASTRUCTURE and masked.response_ids == ()


async def test_the_executor_and_grader_read_a_node_without_its_token_payload(bus):
    """Bytes per node the executor's consumer receives and the grader's lookup brings, for a group
    as the sampler records it now and as it recorded it before the payload had a fact of its own."""
    from tests.node_payload import node_reads, sampled_group

    g = 16
    before = await node_reads(bus, "before", sampled_group("before", g, inline=True))
    after = await node_reads(bus, "after", sampled_group("after", g))
    print(f"bytes per node, before: {before}; after: {after}")
    # the payload (1,200 response ids and logprobs, the prompt and its ids) is what the two no
    # longer carry: the node fact they read is its code, completion and place in the tree
    assert before.executor - after.executor >= 0.95 * after.payload
    assert before.grader - after.grader >= 0.95 * after.payload
    assert after.executor < before.executor / 2 and abs(after.grader - after.executor) < 16
    # the learner: one request a group both ways (G node facts, or G node facts and G payloads)
    assert (before.learner_batches, before.learner_messages) == (1, g)
    assert (after.learner_batches, after.learner_messages) == (1, 2 * g)
    assert after.learner >= before.learner  # it still reads all of it


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


async def test_a_duplicate_on_a_payloads_subject_changes_nothing_the_learner_reads(bus):
    """The fuzz's one case on `tokens.recorded` (tests/bus_fuzz.py, `LOOKED_UP`): other content on a
    payload's own subject, under a fresh id or the fact's own; the first fact stands."""
    from tests.bus_fuzz import LOOKED_UP, Fuzzer, run_facts
    from treegrpo_learner._buffer import read_members

    group = await scored_group(bus, "d1", "t", 1, 0, [1.0, 0.0, 0.5], vocab=320)
    gs = (await bus.last_event("d1", Kind.GROUP_SCORED, group)).group_scored
    before = await read_members(bus, "d1", gs)
    fuzzer, facts = Fuzzer(bus, "d1", seed=3), await run_facts(bus, "d1")
    sent = [await fuzzer.one(kind, "duplicate", facts) for kind in LOOKED_UP for _ in range(12)]
    assert any(s.seq is not None for s in sent) and any(s.seq is None for s in sent)
    assert [await fuzzer.one(Kind.TOKENS_RECORDED, case, facts) for case in ("random", "forged")] == [
        None
    ] * 2
    assert await read_members(bus, "d1", gs) == before
