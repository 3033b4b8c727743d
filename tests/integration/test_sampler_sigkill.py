"""`treegrpo serve sampler` as a real process, SIGKILLed mid-round and restarted (slow: two model loads)."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys

import pytest
from test_sampler_service import begin, expected_ids, grading, sampled_counts, wait_for

from treegrpo.archive import export_runs
from treegrpo.events import Kind

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]


def serve(model_dir, public_root, url, tmp_path, name) -> subprocess.Popen:
    sets = [
        f"model={model_dir}",
        f"nats.url={url}",
        "grpc.port=0",
        f"workdir={tmp_path / 'sampler'}",
        f'prompts.task_roots=["{public_root}"]',
        "sampling.max_new_tokens=12",
    ]
    args = [sys.executable, "-m", "treegrpo.cli", "serve", "sampler"] + [
        x for s in sets for x in ("--set", s)
    ]
    log = open(tmp_path / f"{name}.log", "wb")
    return subprocess.Popen(
        args, stdout=log, stderr=subprocess.STDOUT, env={**os.environ, "TREEGRPO_HOME": str(tmp_path)}
    )


async def test_sigkilled_sampler_process_restarts_and_finishes_the_round_exactly_once(
    bus, nats_server, tiny, public, tmp_path
):
    first = serve(tiny, public, nats_server.url, tmp_path, "first")
    try:
        async with grading(bus):
            spec = await begin(
                bus,
                run_id="kill9",
                tasks=["spooky-mini"],
                rounds=1,
                train=False,
                tree={"expansions": 4, "group_size": 4, "drafts": 2},
            )
            deadline = asyncio.get_running_loop().time() + 120
            while len(await sampled_counts(bus, "kill9")) < 5:
                assert first.poll() is None, (tmp_path / "first.log").read_text()[-3000:]
                assert asyncio.get_running_loop().time() < deadline
                await asyncio.sleep(0.05)
            os.kill(first.pid, signal.SIGKILL)
            first.wait(10)
            assert len(await sampled_counts(bus, "kill9")) < 16
            second = serve(tiny, public, nats_server.url, tmp_path, "second")
            try:
                await wait_for(bus, "kill9", Kind.ROUND_COMPLETED, ("spooky-mini", "1"), timeout=150)
            finally:
                second.send_signal(signal.SIGTERM)
                second.wait(30)
    finally:
        if first.poll() is None:
            first.kill()
    counts = await sampled_counts(bus, "kill9")
    assert set(counts) == expected_ids(spec) and set(counts.values()) == {1}
    [exported] = await export_runs(bus, ["kill9"], tmp_path / "export")  # the summary is a projection
    summary = json.loads(next((tmp_path / "export" / "kill9" / "round_1").glob("*summary*")).read_text())
    assert summary["nodes"] == exported.nodes == 16
