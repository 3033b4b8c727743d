"""A damaged checkpoint on disk, found by a restarted learner process (real processes, real files):
the damaged newest one is reported and skipped, training continues from the one before it with
every group trained exactly once; with nothing left to rebuild the state from (no checkpoint, no
published adapter that verifies, a recorded step's facts gone from the log) the learner stops at
once with a permanent exit and the reason, instead of failing the same way at every restart. A
learner whose step goes non-finite or overflows stops with the step and the cause and publishes
nothing of that step.

Imports a private module: `treegrpo_learner._checkpoint`, `treegrpo_learner._model` (what these tests
exercise is not on the package's public surface).
"""

from __future__ import annotations

import asyncio
import os
import struct
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.learner_events import learner_steps, run_spec, scored_group, start_run
from treegrpo import events
from treegrpo.bus import ADAPTERS, STREAM
from treegrpo.events import Kind
from treegrpo.service import EXIT_PERMANENT
from treegrpo_learner import _checkpoint as ckpt
from treegrpo_learner._model import save_tiny

pytestmark = [pytest.mark.timeout(420), pytest.mark.slow]
ROOT = Path(__file__).resolve().parents[2]


def spawn(nats_url: str, model: Path, tmp: Path, log_name: str, run_id: str, **over) -> subprocess.Popen:
    sets = {
        "model": str(model),
        "checkpoint.dir": str(tmp / "ckpt"),
        "nats.url": nats_url,
        "step.groups_per_step": 1,
        "checkpoint.every": 1,
        "checkpoint.keep": 2,
        "torch_threads": 1,
        "optimizer.lr": 1e-3,
        "ack_wait_s": 4.0,
        "telemetry.enabled": "false",
        "run_id": run_id,
        **over,
    }
    args = [sys.executable, "-m", "treegrpo.cli", "serve", "learner"]
    for k, v in sets.items():
        args += ["--set", f"{k}={v}" if not isinstance(v, str) or v == "false" else f'{k}="{v}"']
    env = {**os.environ, "TREEGRPO_HOME": str(tmp / "home"), "PYTHONUNBUFFERED": "1"}
    return subprocess.Popen(
        args, cwd=ROOT, env=env, stdout=open(tmp / log_name, "w"), stderr=subprocess.STDOUT
    )


async def trained(bus, run_id: str, n: int, timeout: float) -> list:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        steps = await learner_steps(bus, run_id)
        if sum(len(s.sibling_groups) for s in steps) >= n:
            return steps
        await asyncio.sleep(0.2)
    raise AssertionError(f"timed out with {len(steps)} steps")


def stop(proc: subprocess.Popen) -> None:
    proc.terminate()
    proc.wait(60)


def overwrite_values(f: Path) -> None:
    """Keep the safetensors header, overwrite every weight byte: the size stays, values go NaN."""
    data = bytearray(f.read_bytes())
    header = 8 + struct.unpack("<Q", data[:8])[0]
    data[header:] = b"\xff" * (len(data) - header)
    f.write_bytes(bytes(data))


async def test_damaged_newest_checkpoint_falls_back_and_with_nothing_to_rebuild_from_stops_for_good(
    bus, nats_server, tmp_path
):
    model = save_tiny(tmp_path / "model")
    await start_run(bus, run_spec("ck1", ["t"], expansions=6, group_size=3, max_staleness=50))
    groups = [await scored_group(bus, "ck1", "t", 1, step, [1.0, 0.0, 0.5]) for step in range(3)]
    first = spawn(nats_server.url, model, tmp_path, "first.log", "ck1")
    try:
        await trained(bus, "ck1", 3, 150)
    finally:
        stop(first)
    newest = ckpt.latest(tmp_path / "ckpt")
    assert newest.name == "step_000003"
    overwrite_values(newest / "adapter" / "adapter_model.safetensors")
    groups += [await scored_group(bus, "ck1", "t", 1, step, [1.0, 0.0, 0.5]) for step in range(3, 6)]
    second = spawn(nats_server.url, model, tmp_path, "second.log", "ck1")
    try:
        steps = await trained(bus, "ck1", 6, 150)
        await asyncio.sleep(2.0)  # anything trained twice would show up now
        steps = await learner_steps(bus, "ck1")
    finally:
        stop(second)
    log = (tmp_path / "second.log").read_text()
    assert "skipped: step_000003: adapter/adapter_model.safetensors does not match" in log, log[-3000:]
    assert sorted(g for s in steps for g in s.sibling_groups) == sorted(groups)  # each exactly once
    assert [s.step for s in steps] == list(range(1, 7))

    for path in (tmp_path / "ckpt").glob("step_*"):  # every checkpoint left is damaged now,
        f = path / "adapter" / "adapter_model.safetensors"
        f.write_bytes(f.read_bytes()[: f.stat().st_size // 2])
    store = await bus.js.object_store(ADAPTERS)
    for v in range(1, 7):  # no published adapter is left,
        await store.delete(f"ck1/v{v}.tar")
    gone = events.node_id("ck1", "t", 1, 4, 1)  # and a node of step 5's group is gone from the log
    await bus.js.purge_stream(STREAM, subject=events.subject("ck1", Kind.NODE_SAMPLED, gone))
    started = time.monotonic()
    third = spawn(nats_server.url, model, tmp_path, "third.log", "ck1")
    try:
        code = third.wait(120)
    finally:
        if third.poll() is None:
            third.kill()
    log = (tmp_path / "third.log").read_text()
    assert code == EXIT_PERMANENT, log[-3000:]
    assert "cannot rebuild version 5: no checkpoint or published adapter of it verifies, and a " in log
    assert f"node.sampled of its group {groups[4]} is gone from the log" in log
    assert time.monotonic() - started < 120


async def test_another_runs_checkpoints_in_a_shared_folder_stop_the_learner_instead_of_being_adopted(
    bus, nats_server, tmp_path
):
    model = save_tiny(tmp_path / "model")
    await start_run(bus, run_spec("own1", ["t"], expansions=2, group_size=3, max_staleness=50))
    await scored_group(bus, "own1", "t", 1, 0, [1.0, 0.0, 0.5])
    first = spawn(nats_server.url, model, tmp_path, "own1.log", "own1")
    try:
        await trained(bus, "own1", 1, 150)
    finally:
        stop(first)
    await start_run(bus, run_spec("other1", ["t"], expansions=2, group_size=3, max_staleness=50))
    await scored_group(bus, "other1", "t", 1, 0, [1.0, 0.0, 0.5])
    second = spawn(nats_server.url, model, tmp_path, "other1.log", "other1")  # same checkpoint.dir
    try:
        code = second.wait(120)
    finally:
        if second.poll() is None:
            second.kill()
    log = (tmp_path / "other1.log").read_text()
    assert code == EXIT_PERMANENT, log[-3000:]
    assert "holds run 'own1'" in log
    assert await learner_steps(bus, "other1") == []  # nothing trained from the wrong weights
    assert sorted(p.name for p in (tmp_path / "ckpt").glob("step_*")) == ["step_000001"]  # untouched


async def test_a_non_finite_step_is_never_published_and_stops_the_learner(bus, nats_server, tmp_path):
    model = save_tiny(tmp_path / "model")
    await start_run(bus, run_spec("nf1", ["t"], expansions=2, group_size=3, max_staleness=50))
    for step in range(2):
        await scored_group(bus, "nf1", "t", 1, step, [1.0, 0.0, 0.5])
    # an absurd learning rate: step 1 leaves huge (finite) weights, step 2's forward overflows
    proc = spawn(
        nats_server.url, model, tmp_path, "nf.log", "nf1", **{"optimizer.lr": 1e36, "optimizer.grad_clip": 0}
    )
    try:
        code = proc.wait(150)
    finally:
        if proc.poll() is None:
            proc.kill()
    log = (tmp_path / "nf.log").read_text()
    assert code == EXIT_PERMANENT, log[-3000:]
    assert "non-finite" in log and "nothing saved or published" in log
    published = [
        e.policy_published.version async for _s, e in bus.replay("nf1", kinds=[Kind.POLICY_PUBLISHED])
    ]
    assert [s.step for s in await learner_steps(bus, "nf1")] == published == [1]
    assert sorted(p.name for p in (tmp_path / "ckpt").glob("step_*")) == ["step_000001"]


@pytest.mark.parametrize(
    ("settings", "rewards", "cause"),
    [
        ({"optimizer.lr": 1e39}, [1.0, 0.0, 0.5], "value cannot be converted to type float without overflow"),
        ({"estimator": "rloo"}, [3e38, -3e38, 0.0], "is not a float32"),
    ],
    ids=["lr-beyond-float32", "advantage-beyond-float32"],
)
async def test_an_overflowing_step_stops_the_learner_for_good_with_the_step_and_the_cause(
    bus, nats_server, tmp_path, settings, rewards, cause
):
    model = save_tiny(tmp_path / "model")
    await start_run(bus, run_spec("ov1", ["t"], expansions=2, group_size=3, max_staleness=50))
    await scored_group(bus, "ov1", "t", 1, 0, rewards)
    started = time.monotonic()
    proc = spawn(nats_server.url, model, tmp_path, "ov.log", "ov1", **settings)
    try:
        code = proc.wait(150)  # today's loop (reopen, retry, overflow again) never exits
    finally:
        if proc.poll() is None:
            proc.kill()
    log = (tmp_path / "ov.log").read_text()
    assert code == EXIT_PERMANENT, log[-3000:]
    assert "learner: step 1 overflowed (" in log and cause in log, log[-3000:]
    assert "reopening" not in log  # stopped at the first overflow, not retried
    assert time.monotonic() - started < 150
    assert await learner_steps(bus, "ov1") == []
    assert [e async for _s, e in bus.replay("ov1", kinds=[Kind.POLICY_PUBLISHED])] == []
