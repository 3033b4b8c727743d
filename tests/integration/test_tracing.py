"""W3C trace context crosses a NATS hop: the consumer's span is a child of the publisher's."""

from __future__ import annotations

import asyncio

from opentelemetry.trace import SpanKind

from treegrpo import events
from treegrpo.bus import STREAM, Consumer
from treegrpo.events import Kind
from treegrpo.telemetry import memory_spans, setup_tracing
from treegrpo.v1 import events_pb2 as pb


async def test_consumer_span_continues_the_publishers_trace(bus):
    tracer = setup_tracing("test", memory=True)
    with tracer.start_as_current_span("sampler publish") as parent:
        await bus.publish(events.make_event("r1", "test", pb.NodeSampled(node_id="n1")))
    stop = asyncio.Event()

    async def on(event, delivery):
        stop.set()

    consumer = Consumer(bus, "traced", [events.subject_filter(Kind.NODE_SAMPLED)], on, tracer=tracer)
    await asyncio.wait_for(consumer.run(stop), 10)
    spans = {s.name: s for s in memory_spans()}
    child = spans["traced node.sampled"]
    assert child.context.trace_id == parent.get_span_context().trace_id
    assert child.parent.span_id == parent.get_span_context().span_id
    assert child.attributes["treegrpo.event_id"] == "r1.node.sampled.n1"


async def test_an_event_published_outside_any_span_carries_the_context_of_a_recorded_root_span(bus):
    setup_tracing("test", memory=True)
    await bus.publish(events.make_event("r2", "runner", pb.RunStarted(rounds=1)))
    await bus.publish_many([events.make_event("r2", "learner/x", pb.LearnerStepped(step=1))])
    for kind, subject in (
        (Kind.RUN_STARTED, "tg.r2.run.started"),
        (Kind.LEARNER_STEPPED, "tg.r2.learner.step.1"),
    ):
        msg = await bus.js.get_last_msg(STREAM, subject, direct=True)
        _, trace_id, span_id, flags = msg.headers["traceparent"].split("-")
        root = [
            s
            for s in memory_spans()
            if s.name == f"publish {kind}" and f"{s.context.span_id:016x}" == span_id
        ]
        assert len(root) == 1 and root[0].parent is None and root[0].kind is SpanKind.PRODUCER
        assert f"{root[0].context.trace_id:032x}" == trace_id and int(flags, 16) & 1  # sampled
        assert root[0].attributes["messaging.destination.name"] == subject
