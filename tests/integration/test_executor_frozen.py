"""An executor frozen (SIGSTOP) past its ack wait, then thawed (a real `treegrpo serve executor`
process): the redelivered node that still runs is not started a second time, one outcome is
recorded, and a node that ended while the executor was frozen records its own time, not the freeze."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.integration.test_executor_service import public_task, run_started, sampled, wait_executed
from treegrpo.health import heartbeat_path, read_heartbeat

pytestmark = [pytest.mark.timeout(180), pytest.mark.slow]
SLEEP = "import time\ntime.sleep({s})\nopen('submission/submission.csv', 'w').write('id,y\\n0,1\\n')\n"
UID_BASE = 61000  # the executor's default local.sandbox_uid_base: a script runs as UID_BASE + slot
FREEZE_S = 10.0  # past ack_wait (2 s) and past the short script's 3 s


def scripts_running() -> int:
    """Processes of the sandbox's uids (the scripts), read off /proc: the freeze starts once both run,
    however long a loaded machine takes to start them."""
    n = 0
    for status in Path("/proc").glob("[0-9]*/status"):
        with contextlib.suppress(OSError):
            uid = next(line for line in status.read_text().splitlines() if line.startswith("Uid:"))
            n += UID_BASE <= int(uid.split()[1]) < UID_BASE + 64
    return n


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
        while scripts_running() < 2:  # both scripts run
            assert time.monotonic() < deadline and proc.poll() is None, log.read_text()[-3000:]
            await asyncio.sleep(0.05)
        started = time.monotonic()
        proc.send_signal(signal.SIGSTOP)  # past ack_wait: the server redelivers both nodes
        await asyncio.sleep(FREEZE_S)  # the short script ends meanwhile; the long one still runs
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
    # its 3 s (and the interpreter's start, slower on a loaded machine), not the executor's freeze
    assert 3.0 <= got_short.exec_time < FREEZE_S - 1.0, got_short.exec_time
    assert 14.0 <= got_long.exec_time < 14.0 + FREEZE_S, got_long.exec_time  # one run of it, not two
