"""W3C trace context crosses a NATS hop: the consumer's span is a child of the publisher's."""

from __future__ import annotations

import asyncio

from treegrpo import events as ev
from treegrpo.bus import Consumer
from treegrpo.telemetry import memory_spans, setup_tracing
from treegrpo.v1 import events_pb2 as pb


async def test_consumer_span_continues_the_publishers_trace(bus):
    tracer = setup_tracing("test", memory=True)
    with tracer.start_as_current_span("sampler publish") as parent:
        await bus.publish(ev.make_event("r1", "test", pb.NodeSampled(node_id="n1")))
    stop = asyncio.Event()

    async def on(event, delivery):
        stop.set()

    consumer = Consumer(bus, "traced", [ev.subject_filter("node.sampled")], on, tracer=tracer)
    await asyncio.wait_for(consumer.run(stop), 10)
    spans = {s.name: s for s in memory_spans()}
    child = spans["traced node.sampled"]
    assert child.context.trace_id == parent.get_span_context().trace_id
    assert child.parent.span_id == parent.get_span_context().span_id
    assert child.attributes["treegrpo.event_id"] == "r1.node.sampled.n1"
