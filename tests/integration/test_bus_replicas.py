"""One replica count for a deployment, cluster URL lists, and a JetStream 400 that stops at once."""

from __future__ import annotations

import asyncio
import logging

import pytest
from nats.js import api

from treegrpo import events
from treegrpo.bus import STREAM, Bus, Consumer, PermanentError
from treegrpo.events import Kind
from treegrpo.nats_url import server_list
from treegrpo.v1 import events_pb2 as pb

pytestmark = pytest.mark.timeout(30)


def test_server_list_reads_one_url_a_comma_list_or_a_list():
    assert server_list("nats://a:1") == ["nats://a:1"]
    assert server_list(" nats://a:1, nats://b:2 ,") == ["nats://a:1", "nats://b:2"]
    assert server_list(["nats://a:1", "nats://b:2,nats://c:3"]) == ["nats://a:1", "nats://b:2", "nats://c:3"]


async def test_a_service_told_three_replicas_consumes_from_a_one_replica_stream(nats_server, bus, caplog):
    # before: the consumer asked for 3 replicas, JetStream refused (400, err_code 10126), retried forever
    three = await Bus.connect(f"{nats_server.url},{nats_server.url}", "test/three", 5, replicas=3)
    try:
        with caplog.at_level(logging.WARNING, logger="treegrpo.bus._client"):
            await three.ensure()
        assert "has 1 replica(s), this service is configured for 3" in caplog.text
        await bus.publish(events.make_event("r1", "test", pb.NodeSampled(node_id="n1", task="t", round=1)))
        seen: list[str] = []
        stop = asyncio.Event()

        async def on(event, _delivery):
            seen.append(event.node_sampled.node_id)
            stop.set()

        consumer = Consumer(three, "c3", [events.subject_filter(Kind.NODE_SAMPLED)], on)
        await asyncio.wait_for(consumer.run(stop), 10)
        assert seen == ["n1"]
    finally:
        await three.close(2)


async def test_a_consumer_jetstream_refuses_stops_with_the_reason_at_once(bus):
    # a durable of that name already there with an ack policy that cannot be updated (err_code
    # 10012): before, the loop re-bound every few seconds forever with "0 handled" on screen
    await bus.js.add_consumer(
        STREAM, api.ConsumerConfig(durable_name="bad", name="bad", ack_policy=api.AckPolicy.NONE)
    )
    consumer = Consumer(
        bus, "bad", [events.subject_filter(Kind.NODE_SAMPLED)], lambda _e, _d: asyncio.sleep(0)
    )
    with pytest.raises(PermanentError, match="JetStream refused consumer bad"):
        await asyncio.wait_for(consumer.run(asyncio.Event()), 5)
