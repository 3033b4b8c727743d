"""The service shape: setup/run/stop, dispatch by kind, imported history ignored, drain on stop."""

from __future__ import annotations

import asyncio

from pydantic_settings import SettingsConfigDict

from treegrpo import events
from treegrpo.config import NatsSettings, ServiceSettings
from treegrpo.events import Kind
from treegrpo.service import Service
from treegrpo.v1 import events_pb2 as pb


class EchoConfig(ServiceSettings):
    model_config = SettingsConfigDict(env_prefix="TREEGRPO_ECHO_")


class Echo(Service):
    """Answers every node.executed with a node.graded: the smallest real service."""

    name = "echo"
    config_cls = EchoConfig

    def handlers(self):
        return {Kind.NODE_EXECUTED: self.on_executed}

    async def on_executed(self, event, delivery):
        b = event.node_executed
        await self.publish(event.envelope.run_id, pb.NodeGraded(node_id=b.node_id, status=b.status))


async def test_service_handles_live_facts_ignores_imported_history_and_stops_cleanly(bus, nats_server):
    svc = Echo(EchoConfig(nats=NatsSettings(url=nats_server.url)))
    await svc.setup()
    runner = asyncio.create_task(svc.run())
    live = events.make_event("r1", "executor/x", pb.NodeExecuted(node_id="live1", status="ok"))
    old = events.make_event("r1", events.IMPORTED_PRODUCER, pb.NodeExecuted(node_id="old1", status="ok"))
    await bus.publish_many([old, live])
    for _ in range(100):
        if await bus.last_event("r1", Kind.NODE_GRADED, "live1"):
            break
        await asyncio.sleep(0.05)
    assert await bus.last_event("r1", Kind.NODE_GRADED, "live1") is not None
    assert await bus.last_event("r1", Kind.NODE_GRADED, "old1") is None
    await svc.stop()
    await asyncio.wait_for(runner, 15)
    await svc.close()
    info = await bus.js.consumer_info("TREEGRPO", "echo")
    assert info.num_ack_pending == 0 and info.num_pending == 0  # both facts acked: nothing redelivers
