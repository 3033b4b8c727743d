"""Test support: what reading one node costs each service, for a group as the sampler records it
now (each node's payload in its own `tokens.recorded`) and as it recorded it before (the payload
inline in `node.sampled`). Used by tests/integration/test_bus_reads.py and benchmarks/node_bytes.py.

The facts come from the sampler's own builder (`treegrpo_sampler._expand.node_events`) with a real
task's prompt and completions of `tokens` tokens (ids of a 150k vocabulary, as Qwen's).

Imports a private module: `treegrpo_sampler._expand`, `treegrpo_sampler._state`,
`treegrpo_learner._buffer` (the sampler's fact builder and the learner's group read).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from tests.learner_events import run_spec
from treegrpo import events
from treegrpo.bus import Bus, Consumer, ConsumerOptions, Reads
from treegrpo.events import Kind
from treegrpo.v1 import events_pb2 as pb

TASK = "spooky-mini"


@dataclass(frozen=True)
class NodeReads:
    """Payload bytes per node each service's read brings, and the learner's requests per group."""

    executor: int  # the executor's durable consumer (its filters: the kinds routed to it)
    grader: int  # the grader's lookup of one node's node.sampled (the load-bytes tasks' score)
    learner: int  # the learner's read of a group, per node (node facts and payloads)
    learner_batches: int  # batched direct gets the learner sent for the group
    learner_messages: int  # messages they brought
    payload: int  # the encoded tokens.recorded of a node (0 in the inline shape)


def sampled_group(run: str, g: int, tokens: int = 1200, inline: bool = False) -> list[pb.Event]:
    """One draft group's facts, in publish order; `inline`: the shape before tokens.recorded."""
    from treegrpo.prompts import render_prompt, task_context
    from treegrpo_sampler import _expand
    from treegrpo_sampler._state import RunState
    from treegrpo_sampler.backends import Completion
    from treegrpo_sampler.policy import Expansion

    ctx = task_context(TASK)
    messages = render_prompt("draft", ctx.description, ctx.data_overview)
    prompt_ids = [(i * 7919) % 150_000 for i in range(sum(len(m["content"]) for m in messages) // 4)]
    code = "\n".join(f"x{i} = model.fit(features[{i}], labels)  # step {i}" for i in range(tokens // 12))
    comps = [
        Completion(
            f"Plan: fit it.\n```python\n{code}\nprint({k})\n```",
            [(k * 131 + i * 7) % 150_000 for i in range(tokens)],
            [-0.01 * (i % 97) for i in range(tokens)],
            prompt_ids,
            "stop",
        )
        for k in range(g)
    ]
    exp = Expansion(TASK, 1, 0, "draft", None, events.group_id(run, TASK, 1, 0), tuple(range(g)))
    state = RunState(run, run_spec(run, [TASK], expansions=2, group_size=g))
    evs = _expand.node_events(state, exp, messages, _expand.Sampled(comps, 0, 1.0), "t", "s", "m")
    if not inline:
        return evs
    join, out = events.TokenJoin(), []
    for e in evs:
        whole = join.accept(e)
        if whole is not None:  # on the node fact's own envelope
            out.append(pb.Event(envelope=e.envelope, node_sampled=whole))
    return out


async def node_reads(bus: Bus, run: str, evs: list[pb.Event]) -> NodeReads:
    """Publish the group, then read it as the executor, the grader and the learner do."""
    from treegrpo_learner._buffer import read_members

    nodes = [e.node_sampled.node_id for e in evs if e.HasField("node_sampled")]
    payload = [len(events.encode(e)) for e in evs if e.HasField("tokens_recorded")]
    await bus.publish_many(evs)
    executor = await consumed_as_executor(bus, run, len(nodes))
    bus.reads = Reads()
    await bus.last_event(run, Kind.NODE_SAMPLED, nodes[0])
    grader = bus.reads.payload_bytes
    bus.reads = Reads()
    members = await read_members(bus, run, pb.GroupScored(members=[pb.GroupMember(node_id=n) for n in nodes]))
    assert [m.node_id for m in members] == nodes and all(m.response_ids for m in members)
    r = bus.reads
    return NodeReads(
        executor // len(nodes),
        grader,
        r.payload_bytes // len(nodes),
        r.batches,
        r.messages,
        sum(payload) // len(nodes) if payload else 0,
    )


async def consumed_as_executor(bus: Bus, run: str, n: int) -> int:
    """Payload bytes the executor's durable consumer receives for the run's `n` nodes."""
    kinds = [k for k, r in events.TOPOLOGY.items() if "executor" in r.consumers]
    stop, seen = asyncio.Event(), []

    async def on(event, delivery):
        seen.append(events.kind_of(event))
        if len(seen) >= n:
            stop.set()

    filters = [events.subject_filter(k, run) for k in kinds]
    consumer = Consumer(bus, f"executor-{run}", filters, on, ConsumerOptions(fetch_timeout_s=0.5))
    await asyncio.wait_for(consumer.run(stop), 30)
    assert seen == [Kind.NODE_SAMPLED] * n and consumer.dead_lettered == 0
    return consumer.received_bytes
