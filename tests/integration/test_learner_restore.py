"""Checkpoints are a cache of the log (real nats-server, the learner service in-process): with no
checkpoint that verifies, the learner rebuilds its state from the newest published adapter whose
bytes match the sha256 its policy.published recorded, re-trains the recorded steps after it (from
the base weights when no adapter is left), records how in a learner.restored fact, and goes on:
steps and versions continue without a gap or a repeat, every group trained exactly once."""

from __future__ import annotations

import asyncio
import shutil
import struct
from pathlib import Path

import pytest

from tests.integration.test_learner_service import learner_config, start, stop, wait_steps
from tests.learner_events import learner_steps, run_spec, scored_group, start_run
from treegrpo.bus import ADAPTERS
from treegrpo.events import Kind
from treegrpo_learner.service import LearnerService

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory) -> Path:
    from treegrpo.models import build_model

    return build_model(
        tmp_path_factory.mktemp("model") / "m", size="tiny", vocab_size=320, tokenizer_bytes=150_000
    )


def lora(service: LearnerService) -> dict:
    return {k: v.detach().clone() for k, v in service.active.model.state_dict().items() if "lora" in k}


def same_weights(a: dict, b: dict, exact: bool) -> bool:
    import torch

    same = torch.equal if exact else lambda x, y: torch.allclose(x, y, rtol=1e-4, atol=1e-6)
    return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)


async def train(bus, cfg, run_id: str, groups: list[tuple[int, list[float]]], total: int):
    """Start the learner, score `groups` (step, rewards) and wait for `total` steps; its weights."""
    service = LearnerService(cfg)
    task = await start(service)
    try:
        for step, rewards in groups:
            await scored_group(bus, run_id, "t", 1, step, rewards, vocab=320)
        await wait_steps(bus, run_id, total, 120)
        return lora(service)
    finally:
        await stop(service, task)


async def reopen(cfg) -> tuple[LearnerService, asyncio.Task]:
    service = LearnerService(cfg)
    task = await start(service)
    while service.active is None and not service.failure:  # run_id set: it restores at start
        await asyncio.sleep(0.1)
    return service, task


async def facts(bus, run_id: str, kind: Kind) -> list:
    return [getattr(e, kind.field) async for _s, e in bus.replay(run_id, kinds=[kind])]


async def assert_continuous(bus, run_id: str, steps: int, groups: int) -> None:
    trained = await learner_steps(bus, run_id)
    assert [s.step for s in trained] == list(range(1, steps + 1))
    assert sorted(p.version for p in await facts(bus, run_id, Kind.POLICY_PUBLISHED)) == list(
        range(1, steps + 1)
    )
    names = [g for s in trained for g in s.sibling_groups]
    assert len(names) == len(set(names)) == groups  # each group exactly once


def config(nats_server, tiny_model, tmp_path, run_id: str, keep: int = 1):
    return learner_config(
        nats_server.url,
        tiny_model,
        tmp_path,
        step={"groups_per_step": 1},
        checkpoint={"every": 1, "keep": keep},
        run_id=run_id,
    )


async def resume_and_train_step_3(bus, cfg, run_id: str, before: dict, exact: bool) -> None:
    """Reopen after two steps: the learner is back at version 2 with the weights it had (`exact`:
    bit for bit), then trains the next round's group as step 3."""
    service, task = await reopen(cfg)
    try:
        assert not service.failure, service.failure
        assert service.active.state.step == 2 and same_weights(before, lora(service), exact=exact)
        await scored_group(bus, run_id, "t", 1, 2, [0.3, 0.9, 0.1], vocab=320)
        await wait_steps(bus, run_id, 3, 120)
    finally:
        await stop(service, task)


async def test_the_only_checkpoint_truncated_after_step_1_is_rebuilt_from_the_published_adapter(
    bus, nats_server, tiny_model, tmp_path
):
    await start_run(bus, run_spec("tr1", ["t"], expansions=3, group_size=3, max_staleness=50))
    cfg = config(nats_server, tiny_model, tmp_path, "tr1")
    before = await train(bus, cfg, "tr1", [(0, [1.0, 0.0, 0.4])], 1)
    f = tmp_path / "ckpt" / "step_000001" / "trainer.pt"
    f.write_bytes(f.read_bytes()[: f.stat().st_size // 2])
    service, task = await reopen(cfg)
    try:
        assert not service.failure, service.failure
        assert service.active.state.step == 1 and same_weights(before, lora(service), exact=True)
        for step, rewards in [(1, [0.0, 1.0, 0.2]), (2, [0.3, 0.9, 0.1])]:
            await scored_group(bus, "tr1", "t", 1, step, rewards, vocab=320)
        await wait_steps(bus, "tr1", 3, 120)
    finally:
        await stop(service, task)
    (fact,) = await facts(bus, "tr1", Kind.LEARNER_RESTORED)
    (v1,) = [p for p in await facts(bus, "tr1", Kind.POLICY_PUBLISHED) if p.version == 1]
    assert (fact.version, fact.weights_from, fact.adapter_version) == (1, "published", 1)
    assert fact.adapter_sha256 == v1.sha256 and fact.adapter_key == v1.adapter_key
    assert fact.skipped[0].startswith("step_000001: trainer.pt has") and "truncated" in fact.skipped[0]
    assert fact.lost == ["optimizer state (AdamW moments, RNG): reset at version 1"]
    await assert_continuous(bus, "tr1", 3, 3)


def overwrite_with_garbage(f: Path) -> None:
    """Keep the safetensors header, replace every weight byte with garbage: same size, finite-looking."""
    data = bytearray(f.read_bytes())
    header = 8 + struct.unpack("<Q", data[:8])[0]
    data[header:] = bytes((i * 37 + 11) % 251 for i in range(len(data) - header))
    f.write_bytes(bytes(data))


async def test_garbage_after_step_3_and_a_damaged_v3_adapter_rebuild_from_v2_and_the_recorded_step_3(
    bus, nats_server, tiny_model, tmp_path
):
    await start_run(bus, run_spec("gb1", ["t"], expansions=4, group_size=3, max_staleness=50))
    cfg = config(nats_server, tiny_model, tmp_path, "gb1")
    rewards = [[1.0, 0.0, 0.4], [0.0, 1.0, 0.2], [0.3, 0.9, 0.1]]
    await train(bus, cfg, "gb1", list(enumerate(rewards)), 3)
    overwrite_with_garbage(tmp_path / "ckpt" / "step_000003" / "adapter" / "adapter_model.safetensors")
    await bus.put_object(ADAPTERS, "gb1/v3.tar", b"not the tar v3 was")  # the store damaged too
    service, task = await reopen(cfg)
    try:
        assert not service.failure, service.failure
        # step 3 re-trained on v2 with fresh AdamW moments: not the bytes v3 had, the same groups
        assert service.active.state.step == 3 and len(service.active.trained) == 3
        await scored_group(bus, "gb1", "t", 1, 3, [0.5, 0.1, 0.8], vocab=320)
        await wait_steps(bus, "gb1", 4, 120)
    finally:
        await stop(service, task)
    (fact,) = await facts(bus, "gb1", Kind.LEARNER_RESTORED)
    assert (fact.version, fact.weights_from, fact.adapter_version, fact.replayed_steps) == (
        3,
        "published",
        2,
        1,
    )
    assert "step_000003" in fact.skipped[0] and "sha256" in fact.skipped[0]
    assert fact.skipped[1].startswith("v3: gb1/v3.tar hashes to")
    assert any("re-trained from the log" in x for x in fact.lost)
    await assert_continuous(bus, "gb1", 4, 4)


async def test_no_checkpoint_folder_and_no_adapter_left_rebuild_by_re_training_every_recorded_step(
    bus, nats_server, tiny_model, tmp_path
):
    await start_run(bus, run_spec("rb1", ["t"], expansions=3, group_size=3, max_staleness=50))
    cfg = config(nats_server, tiny_model, tmp_path, "rb1")
    before = await train(bus, cfg, "rb1", [(0, [1.0, 0.0, 0.4]), (1, [0.0, 1.0, 0.2])], 2)
    shutil.rmtree(tmp_path / "ckpt")
    store = await bus.js.object_store(ADAPTERS)
    for v in (1, 2):
        await store.delete(f"rb1/v{v}.tar")
    await resume_and_train_step_3(bus, cfg, "rb1", before, exact=False)
    (fact,) = await facts(bus, "rb1", Kind.LEARNER_RESTORED)
    assert (fact.version, fact.weights_from, fact.replayed_steps) == (2, "replay", 2)
    assert [s.split(":")[0] for s in fact.skipped] == ["v2", "v1"]
    assert "not in the tg-adapters bucket" in fact.skipped[0]
    await assert_continuous(bus, "rb1", 3, 3)
    assert (tmp_path / "ckpt" / "step_000003").is_dir()  # the cache is whole again


async def test_a_crash_while_the_background_checkpoint_is_written_resumes_from_the_published_adapter(
    bus, nats_server, tiny_model, tmp_path
):
    await start_run(bus, run_spec("bc1", ["t"], expansions=3, group_size=3, max_staleness=50))
    cfg = config(nats_server, tiny_model, tmp_path, "bc1", keep=2)
    assert cfg.checkpoint.background  # the default: written after the version's confirmed load
    before = await train(bus, cfg, "bc1", [(0, [1.0, 0.0, 0.4]), (1, [0.0, 1.0, 0.2])], 2)
    root = tmp_path / "ckpt"
    # what a crash mid-save leaves: step 2's files in the save's temp folder, LATEST at step 1
    (root / "step_000002").rename(root / ".tmp-step_000002-4242")
    (root / "LATEST").write_text("step_000001")
    await resume_and_train_step_3(bus, cfg, "bc1", before, exact=True)
    (fact,) = await facts(bus, "bc1", Kind.LEARNER_RESTORED)
    assert (fact.version, fact.weights_from, fact.adapter_version) == (2, "published", 2)
    assert fact.checkpoint == "step_000001" and any("moments" in x for x in fact.lost), fact
    # the next step's checkpoint was written and the crashed save's temp folder pruned
    assert sorted(p.name for p in root.glob("*step_*")) == ["step_000002", "step_000003"]
    await assert_continuous(bus, "bc1", 3, 3)


async def test_a_crash_between_publishing_and_recording_a_step_re_sends_that_steps_own_record(
    bus, nats_server, tiny_model, tmp_path, monkeypatch
):
    await start_run(bus, run_spec("pr1", ["t"], expansions=3, group_size=3, max_staleness=50))
    cfg = config(nats_server, tiny_model, tmp_path, "pr1", keep=2)
    service = LearnerService(cfg)
    task = await start(service)
    try:
        g1 = await scored_group(bus, "pr1", "t", 1, 0, [1.0, 0.0, 0.4], vocab=320)
        await wait_steps(bus, "pr1", 1, 120)
        publish = service.bus.publish

        async def lost_at_step_2(event, *args, **kwargs):  # the process dies right after v2 is published
            if event.WhichOneof("body") == "learner_stepped" and event.learner_stepped.step == 2:
                raise ConnectionError("learner gone before recording step 2")
            return await publish(event, *args, **kwargs)

        monkeypatch.setattr(service.bus, "publish", lost_at_step_2)
        g2 = await scored_group(bus, "pr1", "t", 1, 1, [0.0, 1.0, 0.2], vocab=320)
        while not await facts(bus, "pr1", Kind.LEARNER_RESTORED):  # the failed step reopens the run
            await asyncio.sleep(0.2)
        monkeypatch.setattr(service.bus, "publish", publish)
        steps = await wait_steps(bus, "pr1", 2, 120)
    finally:
        await stop(service, task)
    # v2's record comes back from v2's published tar: its own step and groups, not step 1's
    assert [(s.step, list(s.sibling_groups)) for s in steps] == [(1, [g1]), (2, [g2])]
    assert steps[1].phases_s.update_weights > 0
    await assert_continuous(bus, "pr1", 2, 2)
