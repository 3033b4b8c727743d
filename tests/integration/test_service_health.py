"""A service's heartbeat tells the probes what NATS cannot: that its own loops are turning."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import threading
import time

import pytest
from pydantic_settings import SettingsConfigDict

from treegrpo import events
from treegrpo.config import HealthSettings, NatsSettings, ServiceSettings
from treegrpo.events import Kind
from treegrpo.health import problems, read_heartbeat
from treegrpo.service import Service
from treegrpo.v1 import events_pb2 as pb

pytestmark = pytest.mark.timeout(60)
CLI = [sys.executable, "-m", "treegrpo.cli.__main__"]


class StuckConfig(ServiceSettings):
    model_config = SettingsConfigDict(env_prefix="TREEGRPO_STUCK_")


class Stuck(Service):
    """Blocks its event loop for 3 s on each node.executed: a synchronous call in a handler."""

    name = "stuck"
    config_cls = StuckConfig

    def __init__(self, config):
        super().__init__(config)
        self.blocking = threading.Event()

    def handlers(self):
        return {Kind.NODE_EXECUTED: self.on_executed}

    async def on_executed(self, event, delivery):
        self.blocking.set()
        time.sleep(3.0)  # noqa: ASYNC251 - the point: the event loop is blocked


def probe(path, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [*CLI, "health", "--heartbeat", "--file", str(path), *extra],
        capture_output=True,
        text=True,
        timeout=30,
    )


async def test_probe_passes_while_the_loops_turn_fails_while_a_handler_blocks_and_after_stop(
    bus, nats_server, tmp_path
):
    path = tmp_path / "stuck.json"
    svc = Stuck(
        StuckConfig(
            nats=NatsSettings(url=nats_server.url), health=HealthSettings(file=str(path), interval_s=0.2)
        )
    )
    await svc.setup()
    runner = asyncio.create_task(svc.run())
    while not path.exists():
        await asyncio.sleep(0.05)
    await asyncio.sleep(1.5)  # a few fetch rounds
    live = await asyncio.to_thread(probe, path, "--max-age", "2", "--ready", "--url", nats_server.url)
    assert live.returncode == 0, live.stdout

    seen: list[list[str]] = []

    def watch_while_blocked() -> None:  # another thread: the event loop cannot answer now
        svc.blocking.wait(10)
        time.sleep(2.0)
        seen.append(problems(read_heartbeat(path), max_age_s=1.5))

    watcher = threading.Thread(target=watch_while_blocked)
    watcher.start()
    await bus.publish(events.make_event("r1", "executor/x", pb.NodeExecuted(node_id="n1", status="ok")))
    await asyncio.to_thread(watcher.join, 20)
    assert seen and any("blocked" in p for p in seen[0]), seen

    await asyncio.sleep(1.0)  # unblocked: the heartbeat is fresh again
    assert problems(read_heartbeat(path), max_age_s=1.5) == []
    await svc.stop()
    await asyncio.wait_for(runner, 15)
    await svc.close()
    dead = await asyncio.to_thread(probe, path)
    assert dead.returncode == 1 and "stuck is stopped" in dead.stdout


async def test_a_nats_outage_fails_readiness_but_never_liveness(nats_server, tmp_path):
    path = tmp_path / "stuck.json"
    svc = Stuck(
        StuckConfig(
            nats=NatsSettings(url=nats_server.url), health=HealthSettings(file=str(path), interval_s=0.2)
        )
    )
    await svc.setup()
    runner = asyncio.create_task(svc.run())
    while not path.exists() or read_heartbeat(path).state != "running":
        await asyncio.sleep(0.05)
    nats_server.stop()
    try:
        await asyncio.sleep(3.0)  # longer than the max age below: the loops keep turning regardless
        beat = read_heartbeat(path)
        assert problems(beat, max_age_s=2.0) == []
        assert problems(beat, max_age_s=2.0, ready=True) == ["stuck is not connected to NATS"]
    finally:
        nats_server.start()
    deadline = time.monotonic() + 30
    while problems(read_heartbeat(path), max_age_s=2.0, ready=True) and time.monotonic() < deadline:
        await asyncio.sleep(0.2)
    assert problems(read_heartbeat(path), max_age_s=2.0, ready=True) == []  # reconnected: ready again
    await svc.stop()
    await asyncio.wait_for(runner, 15)
    await svc.close()
