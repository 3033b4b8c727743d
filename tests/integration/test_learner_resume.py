"""Kill the learner process (SIGKILL) mid-run, start it again: every group is trained exactly once
and the versions continue without a gap or a repeat.

Imports a private module: `treegrpo_learner._model` (what these tests exercise is not on the package's
public surface).
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.learner_events import learner_steps, run_spec, scored_group, start_run
from treegrpo.events import Kind
from treegrpo_learner._model import save_tiny

pytestmark = [pytest.mark.timeout(420), pytest.mark.slow]
ROOT = Path(__file__).resolve().parents[2]


def spawn(nats_url: str, model: Path, tmp: Path, log_name: str, devices: list[str]) -> subprocess.Popen:
    sets = {
        "devices": json.dumps(devices),
        "model": str(model),
        "checkpoint.dir": str(tmp / "ckpt"),
        "nats.url": nats_url,
        "step.groups_per_step": 1,
        "step.min_seconds": 1.5,
        "checkpoint.every": 2,
        "torch_threads": 1,
        "optimizer.lr": 1e-3,
        "ack_wait_s": 4.0,
        "telemetry.enabled": "false",
    }
    args = [sys.executable, "-m", "treegrpo.cli", "serve", "learner"]
    for k, v in sets.items():
        args += [
            "--set",
            f"{k}={v}" if not isinstance(v, str) or v == "false" or k == "devices" else f'{k}="{v}"',
        ]
    env = {**os.environ, "TREEGRPO_HOME": str(tmp / "home"), "PYTHONUNBUFFERED": "1"}
    return subprocess.Popen(
        args, cwd=ROOT, env=env, stdout=open(tmp / log_name, "w"), stderr=subprocess.STDOUT
    )


async def wait_for(bus, run_id: str, predicate, timeout: float):
    deadline = asyncio.get_running_loop().time() + timeout
    while asyncio.get_running_loop().time() < deadline:
        steps = await learner_steps(bus, run_id)
        if predicate(steps):
            return steps
        await asyncio.sleep(0.1)
    raise AssertionError(f"timed out; steps so far: {[(s.step, list(s.sibling_groups)) for s in steps]}")


@pytest.mark.parametrize("devices", [["cpu"], ["cpu", "cpu"]], ids=["one-rank", "two-gloo-ranks"])
async def test_learner_killed_mid_run_resumes_and_trains_every_group_exactly_once(
    bus, nats_server, tmp_path, devices
):
    model = save_tiny(tmp_path / "model")
    await start_run(bus, run_spec("rk1", ["t"], expansions=6, group_size=3, max_staleness=50))
    groups = [await scored_group(bus, "rk1", "t", 1, step, [1.0, 0.0, 0.5]) for step in range(6)]
    first = spawn(nats_server.url, model, tmp_path, "first.log", devices)
    try:
        await wait_for(bus, "rk1", lambda s: len(s) >= 2, 180)
        await asyncio.sleep(0.7)  # inside step 3 (each step lasts >= 1.5 s)
    finally:
        first.send_signal(signal.SIGKILL)
        first.wait(10)
    killed_at = len(await learner_steps(bus, "rk1"))
    second = spawn(nats_server.url, model, tmp_path, "second.log", devices)
    try:
        steps = await wait_for(bus, "rk1", lambda s: sum(len(x.sibling_groups) for x in s) >= 6, 150)
        await asyncio.sleep(2.0)  # anything trained twice would show up now
        steps = await learner_steps(bus, "rk1")
    finally:
        second.send_signal(signal.SIGTERM)
        second.wait(30)
    trained = [g for s in steps for g in s.sibling_groups]
    assert sorted(trained) == sorted(groups), (trained, (tmp_path / "second.log").read_text()[-2000:])
    assert [s.step for s in steps] == list(range(1, 7))
    assert killed_at < 6
    resumed = (tmp_path / "second.log").read_text()
    assert "learner for run rk1 at version" in resumed
    version = int(resumed.split("learner for run rk1 at version ")[1].split()[0])
    assert 2 <= version <= killed_at + 1  # resumed from durable state, not from scratch
    versions = sorted(
        [e.policy_published.version async for _s, e in bus.replay("rk1", kinds=[Kind.POLICY_PUBLISHED])]
    )
    assert versions == list(range(1, 7))
