"""The executor service on a real nats-server: node.sampled in, node.executed and the submission out."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from nats.js.errors import NotFoundError

from treegrpo import events
from treegrpo.bus import SUBMISSIONS
from treegrpo.config import RunSpec, load
from treegrpo.events import Kind
from treegrpo.v1 import events_pb2 as pb
from treegrpo_executor.config import ExecutorConfig
from treegrpo_executor.service import ExecutorService

pytestmark = pytest.mark.timeout(90)
RUN = "r1"
OK_CODE = (
    "import os\nrows = open('input/train.csv').read().splitlines()\n"
    "open('submission/submission.csv', 'w')"
    ".write('id,y\\n' + '\\n'.join(f'{i},0.5' for i in range(len(rows) - 1)))\n"
    "print('validation metric: 0.5')\n"
)
GPU0 = "# /// script\n# [tool.resources]\n# cpu = 1\n# gpu = 0\n# ///\n" + OK_CODE


def overrides(tmp: Path, url: str) -> dict:
    return {
        "nats": {"url": url},
        "timeout_s": 20,
        "max_concurrency": 2,
        "ack_wait_s": 3,
        "public_data_roots": [str(tmp / "public")],
        "local": {"workspace_root": str(tmp / "ws"), "hidden_paths": []},
        "caps": {"cpu": 1, "mem_gib": 2},
    }


def public_task(tmp: Path) -> None:
    (tmp / "public" / "t").mkdir(parents=True)
    (tmp / "public" / "t" / "train.csv").write_text("id,x\n0,1\n1,2\n2,3\n")


def run_started(gate: bool = True) -> pb.Event:
    spec = RunSpec(run_id=RUN, tasks=["t"], rounds=1, resource_gate=gate)
    body = pb.RunStarted(run_spec_json=spec.model_dump_json(), tasks=["t"], rounds=1, resource_gate=gate)
    return events.make_event(RUN, "test/cli", body)


def sampled(i: int, code: str) -> pb.Event:
    body = pb.NodeSampled(
        node_id=events.node_id(RUN, "t", 1, 2, i),
        task="t",
        round=1,
        step=2,
        parent_id="abcdef012345",
        sibling_group=events.group_id(RUN, "t", 1, 2),
        mode="improve",
        group_size=4,
        index_in_group=i,
        code=code,
    )
    return events.make_event(RUN, "test/sampler", body)


async def wait_executed(bus, node_id: str, timeout: float = 30, run_id: str = RUN) -> pb.NodeExecuted:
    for _ in range(int(timeout / 0.1)):
        got = await bus.last_event(run_id, Kind.NODE_EXECUTED, node_id)
        if got is not None:
            return got.node_executed
        await asyncio.sleep(0.1)
    raise AssertionError(f"no node.executed for {node_id} within {timeout}s")


async def start_service(tmp: Path, url: str, drain_s: float = 1.0) -> tuple[ExecutorService, asyncio.Task]:
    over = overrides(tmp, url)
    over["nats"]["drain_timeout_s"] = drain_s
    svc = ExecutorService(load(ExecutorConfig, None, over))
    await svc.setup()
    return svc, asyncio.create_task(svc.run())


async def stop_service(svc: ExecutorService, task: asyncio.Task) -> None:
    await svc.stop()
    await asyncio.wait_for(task, 30)
    await svc.close()


async def test_service_executes_nodes_copies_identity_and_records_the_gate(bus, nats_server, tmp_path):
    public_task(tmp_path)
    await bus.publish(run_started())
    nodes = [sampled(0, OK_CODE), sampled(1, GPU0), sampled(2, "import nope\n"), sampled(3, "  \n")]
    await bus.publish_many(nodes)
    svc, task = await start_service(tmp_path, nats_server.url)
    try:
        got = [await wait_executed(bus, n.node_sampled.node_id) for n in nodes]
    finally:
        await stop_service(svc, task)
    ok, gpu0, crash, empty = got
    src = nodes[0].node_sampled
    assert (ok.task, ok.round, ok.step, ok.sibling_group, ok.group_size, ok.mode, ok.parent_id) == (
        src.task,
        src.round,
        src.step,
        src.sibling_group,
        src.group_size,
        src.mode,
        src.parent_id,
    )
    assert ok.status == "ok" and ok.submission_key == f"{RUN}/{src.node_id}/submission.csv"
    assert ok.where.startswith("local:") and ok.HasField("exec_timings") and ok.exec_timings.exec > 0
    assert "validation metric" in ok.term_tail and ok.resource_gate and not ok.HasField("resources")
    stored = await bus.get_object(SUBMISSIONS, ok.submission_key)
    assert stored == b"id,y\n0,0.5\n1,0.5\n2,0.5"
    assert gpu0.status == "ok" and not gpu0.HasField("resources")
    assert gpu0.decl_miss_reason == "gpu=0 out of range 1..1" and not gpu0.decl_malformed
    assert (crash.status, crash.exc_type, crash.submission_key) == ("crashed", "ModuleNotFoundError", "")
    assert empty.status == "no_code" and not empty.HasField("exec_timings")


async def test_a_node_already_executed_is_not_run_again_on_redelivery(bus, nats_server, tmp_path):
    public_task(tmp_path)
    await bus.publish(run_started())
    node = sampled(0, OK_CODE)
    done = pb.NodeExecuted(node_id=node.node_sampled.node_id, task="t", status="crashed", exc_type="Earlier")
    await bus.publish(events.make_event(RUN, "executor/earlier", done))
    await bus.publish(node)
    svc, task = await start_service(tmp_path, nats_server.url)
    try:
        for _ in range(100):
            await asyncio.sleep(0.1)
            try:
                info = await bus.js.consumer_info("TREEGRPO", "executor")
            except NotFoundError:  # the durable consumer is made when the loop starts
                continue
            if info.num_pending == 0 and info.num_ack_pending == 0 and info.delivered.stream_seq > 0:
                break
    finally:
        await stop_service(svc, task)
    got = await bus.last_event(RUN, Kind.NODE_EXECUTED, node.node_sampled.node_id)
    assert got.envelope.producer == "executor/earlier" and got.node_executed.exc_type == "Earlier"
    assert len([e async for _, e in bus.replay(RUN, kinds=[Kind.NODE_EXECUTED])]) == 1


async def test_a_node_sampled_before_run_started_waits_for_it(bus, nats_server, tmp_path):
    public_task(tmp_path)
    node = sampled(0, GPU0)
    await bus.publish(node)
    svc, task = await start_service(tmp_path, nats_server.url)
    try:
        await asyncio.sleep(1.0)
        assert await bus.last_event(RUN, Kind.NODE_EXECUTED, node.node_sampled.node_id) is None
        await bus.publish(run_started(gate=False))
        got = await wait_executed(bus, node.node_sampled.node_id)
    finally:
        await stop_service(svc, task)
    assert got.status == "ok" and not got.resource_gate and not got.decl_miss_reason


async def test_executor_stopped_mid_node_leaves_it_to_the_next_executor(bus, nats_server, tmp_path):
    public_task(tmp_path)
    await bus.publish(run_started())
    node = sampled(0, "import time\ntime.sleep(3)\n" + OK_CODE)
    await bus.publish(node)
    svc, task = await start_service(tmp_path, nats_server.url, drain_s=0.2)  # shutdown kills, not waits
    assert svc.consumer_options().ack_wait_s == 3  # the unacked node comes back this soon
    await asyncio.sleep(1.5)  # the script is running now
    await stop_service(svc, task)
    assert await bus.last_event(RUN, Kind.NODE_EXECUTED, node.node_sampled.node_id) is None
    svc, task = await start_service(tmp_path, nats_server.url)
    try:
        got = await wait_executed(bus, node.node_sampled.node_id, timeout=60)
    finally:
        await stop_service(svc, task)
    assert got.status == "ok"


async def test_treegrpo_serve_executor_runs_a_node_end_to_end(bus, nats_server, tmp_path):
    public_task(tmp_path)
    await bus.publish(run_started())
    node = sampled(0, OK_CODE)
    await bus.publish(node)
    env = dict(
        os.environ,
        TREEGRPO_EXECUTOR_LOCAL__WORKSPACE_ROOT=str(tmp_path / "ws"),
        TREEGRPO_EXECUTOR_PUBLIC_DATA_ROOTS=f'["{tmp_path / "public"}"]',
        TREEGRPO_HOME=str(tmp_path / "home"),
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
        "timeout_s=30",
    ]
    proc = subprocess.Popen(cli, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        got = await wait_executed(bus, node.node_sampled.node_id, timeout=60)
    finally:
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=30)
    assert got.status == "ok", out.decode()[-2000:]
    assert await bus.get_object(SUBMISSIONS, got.submission_key) == b"id,y\n0,0.5\n1,0.5\n2,0.5"
    assert proc.returncode == 0, out.decode()[-2000:]
