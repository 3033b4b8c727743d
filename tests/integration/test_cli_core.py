"""The core CLI against a real server: `nats up` finds itself, `events --json`, `serve` errors."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from treegrpo import events
from treegrpo.bus import Bus
from treegrpo.events import Kind
from treegrpo.v1 import events_pb2 as pb

CLI = [sys.executable, "-m", "treegrpo.cli.__main__"]


def run_cli(*args, env=None, timeout=60):
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=timeout, env=env)


async def test_events_json_dumps_a_runs_events_in_order(nats_server):
    bus = await Bus.connect(nats_server.url, "test", 5)
    await bus.ensure()
    await bus.publish_many(
        [events.make_event("r9", "test", pb.NodeSampled(node_id=f"n{i}", task="t")) for i in range(3)]
    )
    await bus.close(2)
    out = run_cli("events", "r9", "--json", "--url", nats_server.url)
    assert out.returncode == 0, out.stderr
    rows = [json.loads(line) for line in out.stdout.splitlines()]
    assert [r["node_sampled"]["node_id"] for r in rows] == ["n0", "n1", "n2"]
    assert rows[0]["envelope"]["event_id"] == "r9.node.sampled.n0"


def test_nats_up_publishes_its_url_under_treegrpo_home(tmp_path):
    env = {**os.environ, "TREEGRPO_HOME": str(tmp_path)}
    proc = subprocess.Popen(
        [*CLI, "nats", "up", "--port", "0"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        url_file = Path(tmp_path) / "nats" / "url"
        for _ in range(100):
            if url_file.exists():
                break
            time.sleep(0.1)
        assert url_file.read_text().startswith("nats://127.0.0.1:")
        health = run_cli("health", env=env)  # no --url: found through TREEGRPO_HOME
        assert health.returncode == 1 and "unhealthy" in health.stdout  # server up, no stream yet
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(15)
    assert not url_file.exists()


def test_serving_an_unknown_service_is_a_clear_error():
    out = run_cli("serve", "warpdrive")
    assert out.returncode != 0
    assert "unknown service 'warpdrive'" in out.stdout + out.stderr


@pytest.mark.timeout(30)
def test_unreachable_nats_fails_within_bounded_time():
    from treegrpo.embedded import free_port

    t0 = time.monotonic()
    out = run_cli("health", "--url", f"nats://127.0.0.1:{free_port()}", "--timeout", "2")
    assert out.returncode == 1 and "could not reach NATS" in out.stdout
    assert time.monotonic() - t0 < 20


async def test_tail_follows_a_run_live_and_stops_after_run_completed(nats_server):
    import asyncio

    bus = await Bus.connect(nats_server.url, "test", 5)
    await bus.ensure()
    await bus.publish(events.make_event("r7", "test", pb.NodeSampled(node_id="a1", task="t", mode="draft")))
    proc = await asyncio.create_subprocess_exec(
        *CLI,
        "tail",
        "r7",
        "--url",
        nats_server.url,
        "--until-complete",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    await asyncio.sleep(2.0)  # tail is following; these arrive live
    await bus.publish(
        events.make_event("r7", "test", pb.NodeExecuted(node_id="a1", status="crashed", exc_type="KeyError"))
    )
    await bus.publish(events.make_event("r7", "test", pb.RunCompleted(outcome="completed")))
    out, err = await asyncio.wait_for(proc.communicate(), 30)
    await bus.close(2)
    text = out.decode()
    assert proc.returncode == 0, err.decode()
    assert Kind.NODE_SAMPLED in text and "a1 crashed KeyError" in text and Kind.RUN_COMPLETED in text
