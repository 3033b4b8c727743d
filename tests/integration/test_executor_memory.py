"""The executor keeps nothing of a node once it is handled (issue 32), on a real nats-server.

The load soak saw the executor's resident memory grow ~4 KB a node: every node left a
done-callback on the consumer's long-lived worker task, holding a copy of the handler's context
and so its span. Here the real service runs a few hundred tiny scripts in its local sandbox
(two slots, ~0.2 s a node), through its real consumer and bus, and counts what is left.
"""

from __future__ import annotations

import asyncio
import gc
from collections import Counter

import pytest
from opentelemetry.sdk.trace import Span

from tests.integration.test_executor_service import public_task, start_service, stop_service
from treegrpo import events
from treegrpo.config import RunSpec
from treegrpo.v1 import events_pb2 as pb
from treegrpo_executor.service import ExecutorService

RUN, TASK, E, G = "r1", "t", 10, 10
WARM, MEASURED = 40, 200  # nodes before the first count, then between the two counts
# finished spans asyncio still holds, whatever the number of nodes: a cancelled timer (a request's
# timeout) keeps its context, so its span, in the loop's heap until the heap is purged (when over
# half of its 100+ timers are cancelled), or its time comes; 5-40 of them were seen here
SPANS_HELD = 100


def run_started(rounds: int) -> pb.Event:
    spec = RunSpec(run_id=RUN, tasks=[TASK], rounds=rounds, tree={"expansions": E, "group_size": G})
    body = pb.RunStarted(run_spec_json=spec.model_dump_json(), tasks=[TASK], rounds=rounds)
    return events.make_event(RUN, "test/cli", body)


def sampled(i: int) -> pb.Event:
    """The i-th node of the run, at a place in the tree its ids derive from (E × G a round)."""
    rnd, rest = divmod(i, E * G)
    step, index = divmod(rest, G)
    body = pb.NodeSampled(
        node_id=events.node_id(RUN, TASK, rnd + 1, step, index),
        task=TASK,
        round=rnd + 1,
        step=step,
        sibling_group=events.group_id(RUN, TASK, rnd + 1, step),
        mode="draft",
        group_size=G,
        index_in_group=index,
        code="print('hi')\n",
    )
    return events.make_event(RUN, "test/sampler", body)


async def handle(svc: ExecutorService, bus, first: int, count: int) -> None:
    await bus.publish_many([sampled(i) for i in range(first, first + count)])
    for _ in range(2400):
        if svc.consumer.processed >= first + count:
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"{svc.consumer.processed} of {first + count} nodes handled in 120 s")


def live() -> tuple[Counter, int]:
    """(the objects the collector tracks, by type; the spans among them), after a full collection."""
    gc.collect()
    objs = gc.get_objects()
    # by the class's MRO, not isinstance: Span is an ABC, whose check caches a weak reference to
    # every class it has not seen, objects the next count would find
    return Counter(type(o).__name__ for o in objs), sum(Span in type(o).__mro__ for o in objs)


@pytest.mark.slow
@pytest.mark.timeout(300)
async def test_handled_nodes_leave_neither_spans_nor_objects_behind(bus, nats_server, tmp_path):
    public_task(tmp_path)
    await bus.publish(run_started(rounds=-(-(WARM + MEASURED) // (E * G))))
    svc, task = await start_service(tmp_path, nats_server.url)
    try:
        await handle(svc, bus, 0, WARM)  # caches, buffers and connections reach their size first
        objs_before, _ = live()
        await handle(svc, bus, WARM, MEASURED)
        objs_after, spans = live()
    finally:
        await stop_service(svc, task)
    # before the fix: every node's span and ~20 objects more per node, for as long as the service ran
    assert spans < SPANS_HELD, f"{spans} spans alive after {WARM + MEASURED} nodes"
    grown = objs_after.copy()
    grown.subtract(objs_before)
    per_node = grown.total() / MEASURED
    assert per_node < 3, f"{per_node:.2f} objects more per node handled, most: {grown.most_common(5)}"
