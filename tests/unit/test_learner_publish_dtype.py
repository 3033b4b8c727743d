"""A version's published adapter in the base's dtype: bfloat16 halves the push, the tensors are
the float32 master weights rounded once (in memory, for the live model and for gathered ranks
alike), the archive carries the sha256 of its bytes, and a learner resuming from it trains in
float32 again.

Imports a private module: `treegrpo_learner._checkpoint`, `treegrpo_learner._model`,
`treegrpo_learner._archive`, `treegrpo_learner._distributed` (what these tests exercise is not on
the package's public surface).
"""

from __future__ import annotations

import hashlib
import tarfile

import torch
from safetensors.torch import load_file

from treegrpo.config import from_values
from treegrpo_learner import _checkpoint as ckpt
from treegrpo_learner._archive import read_archive, write_archive
from treegrpo_learner._model import tiny_qwen3, wrap_lora
from treegrpo_learner.config import LearnerConfig, LoraSettings


def _adapter(seed: int = 0):
    model = wrap_lora(tiny_qwen3(seed=seed), LoraSettings(r=16, alpha=32))
    with torch.no_grad():
        for n, p in model.named_parameters():
            if "lora_B" in n:  # peft starts B at zero: give it values worth rounding
                p.copy_(torch.randn(p.shape, generator=torch.Generator().manual_seed(1)))
    return model


def test_a_bfloat16_archive_holds_half_the_adapter_bytes_rounded_from_the_float32_weights(tmp_path):
    model = _adapter()
    full = write_archive(model, {"state": {}}, tmp_path / "f32.tar").path
    half = write_archive(model, {"state": {}}, tmp_path / "bf16.tar", "bfloat16").path
    sizes = {}
    for name, tar in (("f32", full), ("bf16", half)):
        read_archive(tar, tmp_path / name)
        with tarfile.open(tar) as t:
            sizes[name] = t.getmember("adapter_model.safetensors").size
    w32 = load_file(str(tmp_path / "f32" / "adapter_model.safetensors"))
    w16 = load_file(str(tmp_path / "bf16" / "adapter_model.safetensors"))
    assert w16.keys() == w32.keys() and all(v.dtype == torch.bfloat16 for v in w16.values())
    assert all(torch.equal(w16[k], w32[k].to(torch.bfloat16)) for k in w32)
    assert 2 * sum(v.nbytes for v in w16.values()) == sum(v.nbytes for v in w32.values())
    assert sizes["bf16"] < 0.53 * sizes["f32"]  # the rest is the file's header (names, shapes)


def test_a_learner_resuming_from_a_bfloat16_archive_trains_in_float32(tmp_path):
    write_archive(_adapter(), {"state": {}}, tmp_path / "v1.tar", "bfloat16")
    read_archive(tmp_path / "v1.tar", tmp_path / "v1")
    fresh = wrap_lora(tiny_qwen3(seed=0), LoraSettings(r=16, alpha=32))
    ckpt.load_adapter_weights(fresh, tmp_path / "v1")
    trainable = [p for p in fresh.parameters() if p.requires_grad]
    assert trainable and all(p.dtype == torch.float32 for p in trainable)
    saved = load_file(str(tmp_path / "v1" / "adapter_model.safetensors"))
    b = next(p for n, p in fresh.named_parameters() if "lora_B" in n)
    assert any(torch.equal(b.detach(), v.float()) for k, v in saved.items() if "lora_B" in k)


def test_publish_dtype_follows_the_base_unless_set():
    assert from_values(LearnerConfig, {}).publish.dtype == "auto"
    assert from_values(LearnerConfig, {"publish": {"dtype": "bfloat16"}}).publish.dtype == "bfloat16"


def test_a_bfloat16_archive_of_gathered_weights_matches_the_one_of_the_live_model(tmp_path):
    from treegrpo_learner._distributed import GatheredAdapter, gather_adapter

    model = _adapter()
    live = write_archive(model, {"state": {}}, tmp_path / "live.tar", "bfloat16").path
    gathered = write_archive(
        GatheredAdapter(model, gather_adapter(model)), {"state": {}}, tmp_path / "gathered.tar", "bfloat16"
    ).path
    read_archive(live, tmp_path / "live")
    read_archive(gathered, tmp_path / "gathered")
    a = load_file(str(tmp_path / "live" / "adapter_model.safetensors"))
    b = load_file(str(tmp_path / "gathered" / "adapter_model.safetensors"))
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    assert all(v.dtype == torch.bfloat16 for v in b.values())
    # the live model keeps its float32 master weights: the cast is of copies
    assert all(p.dtype == torch.float32 for p in model.parameters() if p.requires_grad)


def test_an_archive_carries_the_sha256_and_size_of_the_bytes_written(tmp_path):
    archive = write_archive(_adapter(), {"state": {"step": 3}}, tmp_path / "v3.tar", "bfloat16")
    data = archive.path.read_bytes()
    assert (archive.sha256, archive.bytes) == (hashlib.sha256(data).hexdigest(), len(data))
    with tarfile.open(archive.path) as t:  # a whole tar: its members, and nothing after the end blocks
        assert sorted(t.getnames()) == sorted(
            ["README.md", "adapter_config.json", "adapter_model.safetensors", "treegrpo_state.json"]
        )
    assert read_archive(archive.path, tmp_path / "v3") == {"state": {"step": 3}}
