"""An executor frozen (SIGSTOP) past its ack wait, then thawed (a real `treegrpo serve executor`
process): the redelivered node that still runs is not started a second time, one outcome is
recorded, and a node that ended while the executor was frozen records its own time, not the freeze."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time

import pytest

from tests.integration.test_executor_service import public_task, run_started, sampled, wait_executed
from treegrpo.health import heartbeat_path, read_heartbeat

pytestmark = [pytest.mark.timeout(180), pytest.mark.slow]
SLEEP = "import time\ntime.sleep({s})\nopen('submission/submission.csv', 'w').write('id,y\\n0,1\\n')\n"


def inflight(tmp_path) -> int:
    try:
        return read_heartbeat(heartbeat_path("executor", root=tmp_path / "home")).inflight
    except (OSError, ValueError):
        return 0


async def test_a_frozen_executor_runs_each_node_once_and_times_the_script_alone(bus, nats_server, tmp_path):
    public_task(tmp_path)
    await bus.publish(run_started(gate=False))
    long, short = sampled(0, SLEEP.format(s=14)), sampled(1, SLEEP.format(s=3))
    env = dict(
        os.environ,
        TREEGRPO_EXECUTOR_LOCAL__WORKSPACE_ROOT=str(tmp_path / "ws"),
        TREEGRPO_EXECUTOR_PUBLIC_DATA_ROOTS=f'["{tmp_path / "public"}"]',
        TREEGRPO_HOME=str(tmp_path / "home"),
        PYTHONUNBUFFERED="1",
    )
    cli = [
        sys.executable,
        "-m",
        "treegrpo.cli",
        "serve",
        "executor",
        "--set",
        f'nats.url="{nats_server.url}"',
        "--set",
        "max_concurrency=2",
        "--set",
        "timeout_s=60",
        "--set",
        "ack_wait_s=2",
        "--set",
        "health.interval_s=0.1",
    ]
    log = tmp_path / "executor.log"
    proc = subprocess.Popen(cli, env=env, stdout=open(log, "wb"), stderr=subprocess.STDOUT)
    try:
        await bus.publish(long)
        await bus.publish(short)
        deadline = time.monotonic() + 60
        while inflight(tmp_path) < 2:  # both nodes are being handled
            assert time.monotonic() < deadline and proc.poll() is None, log.read_text()[-3000:]
            await asyncio.sleep(0.05)
        await asyncio.sleep(1.0)  # their scripts have started
        started = time.monotonic()
        proc.send_signal(signal.SIGSTOP)  # past ack_wait: the server redelivers both nodes
        await asyncio.sleep(7.0)  # the short script ends meanwhile; the long one still runs
        proc.send_signal(signal.SIGCONT)
        got_short = await wait_executed(bus, short.node_sampled.node_id, timeout=60)
        got_long = await wait_executed(bus, long.node_sampled.node_id, timeout=60)
        await asyncio.sleep(3.0)  # a second execution would log its outcome now
    finally:
        proc.send_signal(signal.SIGCONT)
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)
    text = log.read_text()
    long_id = long.node_sampled.node_id
    assert time.monotonic() - started > 14
    assert got_long.status == got_short.status == "ok", text[-3000:]
    assert text.count(f"node {long_id} improve ok") == 1, text[-3000:]  # one execution, one outcome
    assert f"node {long_id} redelivered while it still runs here" in text
    assert 3.0 <= got_short.exec_time < 6.0, got_short.exec_time  # its 3 s, not the executor's 7 s freeze
    assert 14.0 <= got_long.exec_time < 20.0
