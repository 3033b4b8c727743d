"""Fixtures several integration modules share: a tiny local model, a one-task public tree, and a
sampler's weight receiver on the hf backend (a private module: `treegrpo_sampler.backends._hf`)."""

from __future__ import annotations

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
    loader = AdapterLoader(
        HfBackend(tiny),
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
