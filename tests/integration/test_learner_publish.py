"""A version's publish from the learner's side, against a real nats-server and a real sampler
receiver (the hf backend on the tiny model): the archive is pushed while it is still being
uploaded, the sampler loads it only once `policy.published` names its sha256, and a sampler that
refused a push made before the announcement gets it again at once.

Imports a private module: `treegrpo_learner._archive`, `treegrpo_learner._publish` (the learner's
publishing path is not on the package's public surface). The receiver: tests/integration/conftest.py.
"""

from __future__ import annotations

import asyncio
import time

import pytest
import torch

from treegrpo.events import Kind
from treegrpo_learner._archive import write_archive
from treegrpo_learner._publish import Publisher

pytestmark = pytest.mark.timeout(120)
RUN = "prun"
LOADED_TIMEOUT_S = 30.0  # what a refused push would wait without the re-push: far above these tests


def archive_of(model_dir, tmp_path, version: int):
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    torch.manual_seed(version)
    peft = get_peft_model(
        AutoModelForCausalLM.from_pretrained(model_dir),
        LoraConfig(r=4, target_modules=["q_proj", "v_proj"], init_lora_weights=False),
    )
    return write_archive(peft, {"state": {"step": version}}, tmp_path / f"v{version}.tar")


def publisher(bus, receiver) -> Publisher:
    return Publisher(bus, "learner/test", [receiver.address], -1, 30.0, LOADED_TIMEOUT_S, 3)


async def test_a_version_pushed_beside_its_upload_is_loaded_once_announced(bus, tiny, tmp_path, receiver):
    archive = archive_of(tiny, tmp_path, 1)
    metrics = await publisher(bus, receiver).publish(RUN, 1, archive, str(tiny))
    assert metrics["push_confirmed"] == 1.0 and metrics["push_attempts"] == 1.0, metrics
    assert 0 < metrics["upload_s"] <= metrics["push_s"], metrics
    published = await bus.last_event(RUN, Kind.POLICY_PUBLISHED, "1")
    loaded = await bus.last_event(RUN, Kind.POLICY_LOADED, ("1", "s1"))
    assert published.policy_published.sha256 == loaded.policy_loaded.sha256 == archive.sha256
    assert published.policy_published.bytes == archive.bytes
    assert published.envelope.time <= loaded.envelope.time  # served only once announced
    assert receiver.loader.backend.version == 1


async def test_a_push_refused_before_a_slow_upload_announced_it_goes_again_at_once(
    bus, tiny, tmp_path, receiver, monkeypatch
):
    store = bus.put_object

    async def slow_store(*args):  # an object store that takes longer than the sampler waits
        await asyncio.sleep(receiver.loader.published_wait_s + 1.0)
        return await store(*args)

    monkeypatch.setattr(bus, "put_object", slow_store)
    t0 = time.monotonic()
    metrics = await publisher(bus, receiver).publish(RUN, 1, archive_of(tiny, tmp_path, 1), str(tiny))
    assert metrics["push_confirmed"] == 1.0 and metrics["push_attempts"] == 2.0, metrics
    assert time.monotonic() - t0 < LOADED_TIMEOUT_S / 3  # pushed again, not left to time out
    assert receiver.refusals == 1 and receiver.loader.backend.version == 1


async def test_a_failed_upload_fails_the_publish_and_nothing_is_loaded(
    bus, tiny, tmp_path, receiver, monkeypatch
):
    async def broken_store(*args):
        raise ConnectionError("object store gone")

    monkeypatch.setattr(bus, "put_object", broken_store)
    with pytest.raises(ConnectionError):
        await publisher(bus, receiver).publish(RUN, 1, archive_of(tiny, tmp_path, 1), str(tiny))
    await asyncio.sleep(
        receiver.loader.published_wait_s + 0.5
    )  # past the sampler's wait for the announcement
    assert receiver.loader.backend.version == 0
    assert await bus.last_event(RUN, Kind.POLICY_PUBLISHED, "1") is None
    assert not (tmp_path / "adapters" / RUN / "v1").exists()  # unpacked while it waited, then removed


async def test_a_sleeping_engine_wakes_beside_the_transfer_and_the_step_counts_only_the_wait(
    bus, tiny, tmp_path, sleeping_receiver
):
    # the learner released the GPU before it pushed: the engine starts its wake at the first chunk,
    # and the step's wake phase is the part the load still waited for
    backend = sleeping_receiver.loader.backend
    await backend.sleep(0)
    metrics = await publisher(bus, sleeping_receiver).publish(
        RUN, 1, archive_of(tiny, tmp_path, 1), str(tiny)
    )
    assert metrics["push_confirmed"] == 1.0 and backend.version == 1 and not backend.asleep, metrics
    assert len(backend.wakes) == 1 and backend.wakes[0] < backend.loads[0]  # woken ahead of the load
    assert metrics["sampler_wake_s"] >= backend.WAKE_S, metrics
    assert metrics["sampler_wake_waited_s"] < metrics["sampler_wake_s"], metrics
    loaded = (await bus.last_event(RUN, Kind.POLICY_LOADED, ("1", "s1"))).policy_loaded
    assert loaded.wake_waited_seconds == metrics["sampler_wake_waited_s"]
