"""The bus against a real nats-server: delivery, dedup, redelivery, dead letters, objects, restarts."""

from __future__ import annotations

import asyncio
import hashlib
import os

import pytest

from treegrpo import events
from treegrpo.bus import Bus, Consumer, ConsumerOptions, Deferred, PermanentError, TransientError
from treegrpo.events import Kind
from treegrpo.v1 import events_pb2 as pb

pytestmark = pytest.mark.timeout(60)


def sampled(run: str, i: int) -> pb.Event:
    body = pb.NodeSampled(node_id=f"n{i:04d}", task="t", round=1, code=f"print({i})")
    return events.make_event(run, "test", body)


async def consume_until(bus, durable, kinds, n, handler=None, timeout=15, opts=None):
    seen: list[pb.Event] = []
    stop = asyncio.Event()

    async def on(event, delivery):
        if handler:
            await handler(event, delivery)
        seen.append(event)
        if len(seen) >= n:
            stop.set()

    consumer = Consumer(bus, durable, [events.subject_filter(k) for k in kinds], on, opts)
    await asyncio.wait_for(consumer.run(stop), timeout)
    return seen, consumer


async def test_published_events_are_consumed_in_order_and_acked(bus):
    await bus.publish_many([sampled("r1", i) for i in range(50)])
    seen, _ = await consume_until(bus, "c1", [Kind.NODE_SAMPLED], 50)
    assert [e.node_sampled.node_id for e in seen] == [f"n{i:04d}" for i in range(50)]
    info = await bus.js.consumer_info("TREEGRPO", "c1")
    await asyncio.sleep(0.2)
    info = await bus.js.consumer_info("TREEGRPO", "c1")
    assert info.num_pending == 0


async def test_republished_event_is_deduplicated_by_its_id(bus):
    first = await bus.publish(sampled("r1", 1))
    again = await bus.publish(sampled("r1", 1))
    assert first == again
    info = await bus.js.stream_info("TREEGRPO")
    assert info.state.messages == 1


async def test_unacked_message_is_redelivered_after_consumer_dies(bus):
    await bus.publish(sampled("r1", 7))
    opts = ConsumerOptions(ack_wait_s=1.0)
    stop = asyncio.Event()
    started = asyncio.Event()

    async def hang(event, delivery):
        started.set()
        await asyncio.sleep(3600)  # the "process" dies before acking

    c = Consumer(bus, "worker", [events.subject_filter(Kind.NODE_SAMPLED)], hang, opts)
    task = asyncio.create_task(c.run(stop))
    await asyncio.wait_for(started.wait(), 10)
    task.cancel()
    for t in list(c._inflight):
        t.cancel()
    await asyncio.sleep(0)
    deliveries = []
    seen, _ = await consume_until(
        bus, "worker", [Kind.NODE_SAMPLED], 1, handler=lambda e, d: _record(deliveries, d), opts=opts
    )
    assert seen[0].node_sampled.node_id == "n0007"
    assert deliveries[0].num_delivered >= 2


async def _record(store, delivery):
    store.append(delivery)


async def test_garbage_payload_goes_to_dead_letter_with_reason(bus):
    await bus.publish_raw("tg.r1.node.sampled.garbage", b"\xff\x00 not a protobuf \x13\x37")
    await bus.publish(sampled("r1", 2))
    seen, consumer = await consume_until(bus, "c2", [Kind.NODE_SAMPLED], 1)
    assert consumer.dead_lettered == 1
    sub = await bus.js.pull_subscribe("tgdlq.>", durable=None, stream="TREEGRPO_DLQ")
    msgs = await sub.fetch(1, timeout=5)
    dead = events.decode(msgs[0].data).dead_lettered
    assert dead.subject == "tg.r1.node.sampled.garbage"
    assert "not a treegrpo Event" in dead.reason


async def test_transient_errors_are_retried_and_permanent_ones_dead_lettered(bus):
    await bus.publish_many([sampled("r1", 1), sampled("r1", 2)])
    attempts: dict[str, int] = {}

    async def flaky(event, delivery):
        nid = event.node_sampled.node_id
        attempts[nid] = attempts.get(nid, 0) + 1
        if nid == "n0001" and attempts[nid] < 3:
            raise TransientError("not yet", delay_s=0.05)
        if nid == "n0002":
            raise PermanentError("cannot ever work")

    seen, consumer = await consume_until(bus, "c3", [Kind.NODE_SAMPLED], 1, handler=flaky)
    await asyncio.sleep(0.3)
    assert attempts["n0001"] == 3 and attempts["n0002"] == 1
    assert consumer.dead_lettered == 1


async def test_a_deferred_message_waits_past_max_deliver_and_is_never_dead_lettered(bus):
    """An unscoped learner busy with another run defers that run's groups: however long the wait,
    they are redelivered, not dead-lettered (a TransientError would be after max_deliver)."""
    await bus.publish(sampled("r1", 1))
    attempts = []

    async def busy_then_free(event, delivery):
        attempts.append(delivery.num_delivered)
        if len(attempts) <= 5:
            raise Deferred("busy with another run", delay_s=0.05)

    opts = ConsumerOptions(max_deliver=2)
    seen, consumer = await consume_until(
        bus, "c-defer", [Kind.NODE_SAMPLED], 1, handler=busy_then_free, opts=opts
    )
    assert len(attempts) == 6 and attempts[-1] == 6  # five deferrals past max_deliver = 2, then handled
    assert consumer.dead_lettered == 0 and consumer.deferred == 5 and consumer.errors == 0


async def test_object_store_round_trips_a_50mb_blob(bus, tmp_path):
    blob = os.urandom(50 * 1024 * 1024)
    sha, size = await bus.put_object("tg-submissions", "big/blob.bin", blob)
    assert size == len(blob) and sha == hashlib.sha256(blob).hexdigest()
    out = await bus.get_object("tg-submissions", "big/blob.bin", tmp_path / "blob.bin")
    assert hashlib.sha256(out.read_bytes()).hexdigest() == sha


async def test_an_object_put_from_a_file_reports_the_sha256_of_its_bytes(bus, tmp_path):
    for name, data in (("empty", b""), ("odd", os.urandom(3 * 1024 * 1024 + 7))):
        path = tmp_path / name
        path.write_bytes(data)
        sha, size = await bus.put_object("tg-adapters", f"files/{name}", path)
        assert (sha, size) == (hashlib.sha256(data).hexdigest(), len(data))
        assert await bus.object_digest("tg-adapters", f"files/{name}") == (len(data), sha)


async def test_consumer_survives_server_restart_without_losing_events(nats_server):
    bus = await Bus.connect(nats_server.url, "test/restart", timeout_s=5)
    await bus.ensure()
    await bus.publish_many([sampled("r1", i) for i in range(10)])
    got: set[str] = set()
    stop = asyncio.Event()

    async def on(event, delivery):
        got.add(event.node_sampled.node_id)
        if len(got) == 30:
            stop.set()

    c = Consumer(bus, "restarter", [events.subject_filter(Kind.NODE_SAMPLED)], on)
    task = asyncio.create_task(c.run(stop))
    for _ in range(100):
        if len(got) >= 10:
            break
        await asyncio.sleep(0.05)
    nats_server.kill()
    await asyncio.sleep(0.5)
    nats_server.start()
    for _ in range(100):  # publish again once the client has reconnected
        try:
            await bus.publish_many([sampled("r1", i) for i in range(10, 30)])
            break
        except Exception:
            await asyncio.sleep(0.2)
    await asyncio.wait_for(task, 30)
    assert got == {f"n{i:04d}" for i in range(30)}
    await bus.close(2)


async def test_replay_returns_a_runs_events_in_order_and_last_event_finds_by_key(bus):
    await bus.publish_many([sampled("r1", i) for i in range(5)] + [sampled("r2", 9)])
    items = [e async for _, e in bus.replay("r1")]
    assert [e.node_sampled.node_id for e in items] == [f"n{i:04d}" for i in range(5)]
    assert [e async for _, e in bus.replay("r3")] == []
    found = await bus.last_event("r2", Kind.NODE_SAMPLED, "n0009")
    assert found is not None and found.node_sampled.code == "print(9)"
    assert await bus.last_event("r2", Kind.NODE_SAMPLED, "nope") is None


async def test_unreachable_nats_fails_fast_with_a_clear_message():
    from treegrpo.bus import BusUnavailable
    from treegrpo.embedded import free_port

    with pytest.raises(BusUnavailable, match="could not reach NATS"):
        await Bus.connect(f"nats://127.0.0.1:{free_port()}", "test", timeout_s=1.5)


async def test_a_body_on_another_kinds_subject_is_dead_lettered_and_skipped_by_replay(bus):
    forged = events.make_event("r1", "executor", pb.NodeGraded(node_id="n1", status="ok"))
    await bus.publish_raw("tg.r1.node.executed.n1", events.encode(forged))  # allowed subject, forged body
    await bus.publish(events.make_event("r1", "executor", pb.NodeExecuted(node_id="n2", status="ok")))
    seen, consumer = await consume_until(bus, "c9", [Kind.NODE_EXECUTED], 1)
    assert [e.node_executed.node_id for e in seen] == ["n2"] and consumer.dead_lettered == 1
    assert [e.envelope.event_id async for _, e in bus.replay("r1")] == ["r1.node.executed.n2"]


async def test_a_facts_subject_keeps_its_first_fact_other_content_is_dead_lettered_garbage_stepped_over(bus):
    first = sampled("r1", 1)
    await bus.publish_raw(events.subject_of(first), b"\x00garbage")  # before the fact, on its subject
    await bus.publish(first)
    other = sampled("r1", 1)
    other.node_sampled.code = "print('other')"  # same id, other content, stored under another Nats-Msg-Id
    await bus.publish_raw(events.subject_of(other), events.encode(other), headers={"Nats-Msg-Id": "forged-1"})
    again = sampled("r1", 1)  # the same fact once more (as after the duplicate window): handled again
    await bus.publish_raw(events.subject_of(again), events.encode(again), headers={"Nats-Msg-Id": "late-1"})
    await bus.publish(sampled("r1", 2))
    seen, consumer = await consume_until(bus, "c10", [Kind.NODE_SAMPLED], 3)
    assert [e.node_sampled.code for e in seen] == ["print(1)", "print(1)", "print(2)"]
    from tests.bus_fuzz import dead_letters

    reasons = [why for _, why in sorted((await dead_letters(bus)).items())]  # in stream order
    assert consumer.dead_lettered == 2 and len(reasons) == 2  # the garbage, and the other content
    assert (
        "not a treegrpo Event" in reasons[0] and "already holds a different fact (stream seq 2)" in reasons[1]
    )
    assert (await bus.last_event("r1", Kind.NODE_SAMPLED, "n0001")).node_sampled.code == "print(1)"
    assert [e.node_sampled.code async for _, e in bus.replay("r1")] == ["print(1)", "print(2)"]
