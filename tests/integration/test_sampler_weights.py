"""Adapter hot-swap over gRPC against a real nats-server: verified, confirmed, refused when bad.

Imports a private module: `treegrpo_sampler.backends._hf` (what these tests exercise is not on the
package's public surface).
"""

from __future__ import annotations

import asyncio
import hashlib
import io
import logging
import re
import tarfile

import pytest
import torch

from treegrpo import events
from treegrpo.bus import ADAPTERS
from treegrpo.events import Kind
from treegrpo.v1 import events_pb2 as pb
from treegrpo_sampler import (
    AdapterLoader,
    SamplingParams,
    VersionGate,
    WeightReceiver,
    push_adapter,
)
from treegrpo_sampler.backends import EngineLost
from treegrpo_sampler.backends._hf import HfBackend

pytestmark = pytest.mark.timeout(120)
RUN = "wrun"
MSGS = [{"role": "user", "content": "Write a script."}]


def adapter_tar(model_dir, tmp_path, seed: int, poison: bool = False) -> bytes:
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    torch.manual_seed(seed)
    peft = get_peft_model(
        AutoModelForCausalLM.from_pretrained(model_dir),
        LoraConfig(r=4, target_modules=["q_proj", "v_proj"], init_lora_weights=False),
    )
    if poison:  # what a learner that trained to `loss nan` would save
        with torch.no_grad():
            next(p for n, p in peft.named_parameters() if "lora_B" in n).view(-1)[:3] = float("nan")
    out = tmp_path / f"adapter{seed}"
    peft.save_pretrained(out)
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for f in sorted(out.iterdir()):
            tar.add(f, arcname=f.name)
    return buf.getvalue()


async def announce(bus, version: int, data: bytes) -> pb.PolicyPublished:
    key = f"{RUN}/v{version}.tar"
    sha, size = await bus.put_object(ADAPTERS, key, data)
    body = pb.PolicyPublished(version=version, adapter_key=key, sha256=sha, bytes=size, step=version)
    await bus.publish(events.make_event(RUN, "learner/test", body))
    return body


async def test_pushed_adapter_is_verified_loaded_and_confirmed_on_the_bus(
    bus, tiny, tmp_path, receiver, caplog
):
    assert receiver.address.startswith("127.0.0.1:") and receiver.port > 0
    data = adapter_tar(tiny, tmp_path, 1)
    await announce(bus, 1, data)
    with caplog.at_level(logging.INFO, logger="treegrpo_sampler"):
        ack = await push_adapter(receiver.address, RUN, 1, data, chunk_bytes=4096)
    assert ack.accepted, ack.reason
    # where the version's way went, one line each for the transfer and the rest (a slow load's cause)
    lines = [r.getMessage() for r in caplog.records if f"v1 of run {RUN}: " in r.getMessage()]
    assert (
        lines[0] == f"v1 of run {RUN}: received {len(data) / 1e6:.1f} MB in " + lines[0].rsplit(" in ", 1)[1]
    )
    assert re.fullmatch(
        rf"serving v1 of run {RUN}: unpacked [\d.]+ s, checked [\d.]+ s, prepared [\d.]+ s, "
        r"announced [\d.]+ s, swapped [\d.]+ s",
        lines[1],
    ), lines
    # the same seconds, typed, for a benchmark to record (benchmarks/_vllm_gpu_parts.py)
    stages = receiver.loader.last_stages
    assert list(stages) == ["unpacked", "checked", "prepared", "announced", "swapped"]
    assert all(s >= 0 for s in stages.values()) and receiver.last_received_s > 0
    assert ack.version == 1 and ack.sha256 == hashlib.sha256(data).hexdigest()
    loaded = await bus.last_event(RUN, Kind.POLICY_LOADED, ("1", "s1"))
    assert loaded is not None and loaded.policy_loaded.sha256 == ack.sha256
    assert receiver.loader.backend.version == 1
    again = await push_adapter(receiver.address, RUN, 1, data)  # a retried push is idempotent
    assert again.accepted and again.version == 1


async def test_corrupt_truncated_or_unannounced_pushes_are_refused_and_the_old_version_serves(
    bus, tiny, tmp_path, receiver
):
    good = adapter_tar(tiny, tmp_path, 1)
    await announce(bus, 1, good)
    assert (await push_adapter(receiver.address, RUN, 1, good)).accepted
    v2 = adapter_tar(tiny, tmp_path, 2)
    await announce(bus, 2, v2)

    flipped = bytearray(v2)
    flipped[len(v2) // 2] ^= 0xFF
    sha = hashlib.sha256(v2).hexdigest()
    corrupt = await _push_raw(receiver.address, 2, bytes(flipped), sha, len(v2))
    assert not corrupt.accepted and "sha256 mismatch" in corrupt.reason

    truncated = await _push_raw(receiver.address, 2, v2[: len(v2) // 3], sha, len(v2))
    assert not truncated.accepted and "truncated" in truncated.reason

    other = adapter_tar(tiny, tmp_path, 3)  # self-consistent, but not what policy.published announced
    mismatch = await push_adapter(receiver.address, RUN, 2, other)
    assert not mismatch.accepted and Kind.POLICY_PUBLISHED in mismatch.reason

    unannounced = await push_adapter(receiver.address, RUN, 5, other)
    assert not unannounced.accepted and "no policy.published" in unannounced.reason

    garbage = b"not a tar at all" * 100
    await announce(bus, 3, garbage)
    bad_tar = await push_adapter(receiver.address, RUN, 3, garbage)
    assert not bad_tar.accepted and "corrupt adapter archive" in bad_tar.reason

    backend = receiver.loader.backend
    assert backend.version == 1 and corrupt.version == 1 and receiver.refusals == 5
    assert (await backend.generate(MSGS, 1, SamplingParams(max_new_tokens=4)))[0].token_ids
    assert await bus.last_event(RUN, Kind.POLICY_LOADED, ("2", "s1")) is None
    ok = await push_adapter(receiver.address, RUN, 2, v2)
    assert ok.accepted and backend.version == 2


async def test_a_published_version_can_be_pulled_from_the_object_store(bus, tiny, tmp_path, receiver):
    data = adapter_tar(tiny, tmp_path, 4)
    published = await announce(bus, 1, data)
    result = await receiver.loader.pull(RUN, published)
    assert result.accepted and receiver.loader.backend.version == 1
    assert await bus.last_event(RUN, Kind.POLICY_LOADED, ("1", "s1")) is not None


async def _push_raw(address: str, version: int, data: bytes, sha: str, total: int):
    import grpc

    from treegrpo.v1 import weights_pb2 as wpb
    from treegrpo.v1 import weights_pb2_grpc as wgrpc

    def chunks():
        for off in range(0, len(data), 2048):
            yield wpb.AdapterChunk(
                run_id=RUN,
                version=version,
                sha256=sha,
                total_bytes=total,
                offset=off,
                data=data[off : off + 2048],
            )

    async with grpc.aio.insecure_channel(address) as channel:
        return await wgrpc.WeightSyncStub(channel).PushAdapter(chunks(), timeout=30)


async def test_an_adapter_with_non_finite_values_is_refused_and_the_last_good_one_keeps_serving(
    bus, tiny, tmp_path, receiver
):
    good = adapter_tar(tiny, tmp_path, 1)
    await announce(bus, 1, good)
    assert (await push_adapter(receiver.address, RUN, 1, good)).accepted
    nan = adapter_tar(tiny, tmp_path, 2, poison=True)
    await announce(bus, 2, nan)  # announced with its true sha256: only its values give it away
    pushed = await push_adapter(receiver.address, RUN, 2, nan)
    assert not pushed.accepted and "3 non-finite values" in pushed.reason
    pulled = await receiver.loader.pull(RUN, await announce(bus, 2, nan))
    assert not pulled.accepted and "non-finite" in pulled.reason
    assert not (tmp_path / "adapters" / RUN / "v2").exists()  # a refused version leaves no folder
    backend = receiver.loader.backend
    assert backend.version == 1 and await bus.last_event(RUN, Kind.POLICY_LOADED, ("2", "s1")) is None
    assert (await backend.generate(MSGS, 1, SamplingParams(max_new_tokens=4)))[0].token_ids


async def test_a_load_whose_caller_is_cancelled_still_records_the_version_it_swapped_in(
    bus, tiny, tmp_path, receiver, monkeypatch
):
    # the learner killed mid-push cancels the RPC's handler; seen in the compose stack: the backend
    # had loaded v1 but the sampler kept no sha or run for it, so every later push was refused
    data = adapter_tar(tiny, tmp_path, 6)
    published = await announce(bus, 1, data)
    loader = receiver.loader
    real, entered = loader.backend.load_adapter, asyncio.Event()

    async def slow_load(version, folder):  # a load that takes a while, as a 173 MB adapter's does
        entered.set()
        await real(version, folder)
        await asyncio.sleep(0.3)

    monkeypatch.setattr(loader.backend, "load_adapter", slow_load)
    load = asyncio.create_task(loader.pull(RUN, published))
    await entered.wait()
    await asyncio.sleep(0.05)
    load.cancel()  # the caller goes away mid-swap
    for _ in range(100):
        if loader.serving_sha:
            break
        await asyncio.sleep(0.05)
    assert loader.backend.version == 1
    assert loader.serving_sha == published.sha256 and loader.serving_run == RUN
    again = await push_adapter(receiver.address, RUN, 1, data)  # the learner's re-push is confirmed
    assert again.accepted and again.version == 1, again.reason


async def test_an_engine_that_cannot_wake_refuses_the_push_and_stops_the_sampler_with_why(
    bus, tiny, tmp_path
):
    # a colocated vLLM engine whose wake ran out of memory (the 27B on one H200): no version can
    # load again, so the loader hands the reason to the service's fail() instead of refusing forever
    class CannotWake(HfBackend):
        async def load_adapter(self, version, folder):
            raise EngineLost("the vLLM engine could not wake: CUDA Error: out of memory")

    lost: list[str] = []
    loader = AdapterLoader(
        CannotWake(tiny),
        bus,
        VersionGate(),
        "s1",
        tmp_path / "adapters",
        "sampler/s1",
        published_wait_s=1.0,
        on_engine_lost=lost.append,
    )
    rec = WeightReceiver(loader, "127.0.0.1", 0)
    await rec.start()
    try:
        data = adapter_tar(tiny, tmp_path, 1)
        await announce(bus, 1, data)
        ack = await push_adapter(rec.address, RUN, 1, data)
    finally:
        await rec.stop()
    assert not ack.accepted and "out of memory" in ack.reason and ack.version == 0
    assert len(lost) == 1 and "could not wake" in lost[0]
    assert await bus.last_event(RUN, Kind.POLICY_LOADED, ("1", "s1")) is None


async def test_a_push_wakes_a_sleeping_engine_at_its_first_chunk_and_holds_it_awake_until_loaded(
    bus, tiny, tmp_path, sleeping_receiver
):
    import time

    import grpc

    from treegrpo.v1 import weights_pb2 as wpb
    from treegrpo.v1 import weights_pb2_grpc as wgrpc

    loader, data = sleeping_receiver.loader, adapter_tar(tiny, tmp_path, 1)
    backend, sha = loader.backend, (await announce(bus, 1, data)).sha256
    await backend.sleep(0)
    seen_loading: list[bool] = []

    async def slow_chunks():  # a transfer that takes 0.3 s, as a 467 MB 27B adapter's does
        for off in range(0, len(data), len(data) // 3 + 1):
            yield wpb.AdapterChunk(
                run_id=RUN,
                version=1,
                sha256=sha,
                total_bytes=len(data),
                offset=off,
                data=data[off : off + len(data) // 3 + 1],
            )
            await asyncio.sleep(0.1)
            seen_loading.append(loader.loading)  # what the pump asks before it puts the engine to sleep

    started = time.perf_counter()
    async with grpc.aio.insecure_channel(sleeping_receiver.address) as channel:
        ack = await wgrpc.WeightSyncStub(channel).PushAdapter(slow_chunks(), timeout=30)
    assert ack.accepted, ack.reason
    assert all(seen_loading) and not loader.loading and not backend.asleep
    assert backend.wakes[0] - started < 0.1 < backend.loads[0] - started  # at the first chunk, not the load
    loaded = (await bus.last_event(RUN, Kind.POLICY_LOADED, ("1", "s1"))).policy_loaded
    assert loaded.wake_seconds >= backend.WAKE_S
    assert loaded.wake_waited_seconds <= loaded.wake_seconds - 0.2  # the transfer hid the rest


async def test_a_refused_push_that_woke_the_engine_lets_it_sleep_again(
    bus, tiny, tmp_path, sleeping_receiver
):
    loader = sleeping_receiver.loader
    await loader.backend.sleep(0)
    unannounced = await push_adapter(sleeping_receiver.address, RUN, 5, adapter_tar(tiny, tmp_path, 2))
    assert not unannounced.accepted and "no policy.published" in unannounced.reason
    assert not loader.loading and loader.backend.version == 0  # the pump may put it to sleep again
    await asyncio.sleep(loader.backend.WAKE_S)  # the wake it started ends; the engine stays awake
    data = adapter_tar(tiny, tmp_path, 3)
    await announce(bus, 1, data)
    assert (await push_adapter(sleeping_receiver.address, RUN, 1, data)).accepted
    loaded = (await bus.last_event(RUN, Kind.POLICY_LOADED, ("1", "s1"))).policy_loaded
    assert not loaded.HasField("wake_waited_seconds") and loaded.wake_seconds == 0.0  # no wake of its own
