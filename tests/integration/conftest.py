"""Fixtures several integration modules share: a tiny local model, a one-task public tree, and a
sampler's weight receiver on the hf backend (a private module: `treegrpo_sampler.backends._hf`)."""

from __future__ import annotations

import asyncio
import time

import pytest

from treegrpo.models import build_model
from treegrpo_sampler import AdapterLoader, VersionGate, WeightReceiver
from treegrpo_sampler.backends._hf import HfBackend


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return build_model(
        tmp_path_factory.mktemp("model") / "tiny", size="tiny", vocab_size=1024, tokenizer_bytes=1 << 20
    )


@pytest.fixture
def public(tmp_path):
    root = tmp_path / "public"
    task = root / "spooky-mini"
    task.mkdir(parents=True)
    (task / "description.md").write_text("# Spooky mini\nPredict the author of each sentence. Log loss.")
    (task / "train.csv").write_text("id,text,author\nid1,It was dark.,EAP\nid2,The thing.,HPL\n")
    return root


@pytest.fixture
async def receiver(bus, tiny, tmp_path):
    """A sampler's gRPC weight receiver (sampler id `s1`) loading into the hf backend on `tiny`,
    unpacking under tmp_path/adapters."""
    async for rec in _serving(HfBackend(tiny), bus, tmp_path):
        yield rec


async def _serving(backend, bus, tmp_path):
    """A weight receiver (sampler `s1`) loading into `backend`, until the test ends."""
    loader = AdapterLoader(
        backend,
        bus,
        VersionGate(),
        "s1",
        tmp_path / "adapters",
        "sampler/s1",
        published_wait_s=1.0,  # the wait for a push's policy.published: short, for tests
    )
    rec = WeightReceiver(loader, "127.0.0.1", 0)
    await rec.start()
    try:
        yield rec
    finally:
        await rec.stop()


class SleepingHf(HfBackend):
    """The hf backend with a colocated engine's sleep mode: it sleeps while the learner steps, and
    its wake takes `WAKE_S`, as a vLLM engine's takes 0.44 s on the 9B and 1.2 s on the 27B. Each
    wake's and load's start is kept (perf_counter)."""

    WAKE_S = 0.4

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.asleep = False
        self.last_sleep_seconds = self.last_wake_seconds = 0.0
        self.wakes: list[float] = []
        self.loads: list[float] = []

    async def sleep(self, version: int | None = None) -> bool:
        self.asleep, self.last_sleep_seconds = True, 0.01
        return True

    async def wake(self) -> float:
        if not self.asleep:
            return 0.0
        self.wakes.append(time.perf_counter())
        await asyncio.sleep(self.WAKE_S)
        self.asleep, self.last_wake_seconds = False, time.perf_counter() - self.wakes[-1]
        return self.last_wake_seconds

    async def load_adapter(self, version: int, adapter_dir) -> None:
        self.loads.append(time.perf_counter())
        await self.wake()  # an engine still asleep wakes inside the load, as vLLM's does
        await super().load_adapter(version, adapter_dir)


@pytest.fixture
async def sleeping_receiver(bus, tiny, tmp_path):
    """`receiver`, its backend a `SleepingHf`."""
    async for rec in _serving(SleepingHf(tiny), bus, tmp_path):
        yield rec
