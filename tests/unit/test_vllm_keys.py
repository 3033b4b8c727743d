"""Adapter keys renamed for vLLM's multimodal wrappers (Qwen3.5), left alone for plain causal LMs.

Imports a private module: `treegrpo_sampler.backends._vllm_keys`, `treegrpo_sampler.backends._vllm`
(what these tests exercise is not on the package's public surface; vLLM itself is not imported).
"""

from __future__ import annotations

import json

import pytest
import torch
from safetensors.torch import load_file, save_file

from treegrpo_sampler.backends._vllm import VllmBackend
from treegrpo_sampler.backends._vllm_keys import adapter_for_engine

pytestmark = pytest.mark.timeout(30)
KEY = "base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight"


def adapter(tmp_path, key=KEY):
    folder = tmp_path / "v1"
    folder.mkdir()
    (folder / "adapter_config.json").write_text(json.dumps({"r": 4}))
    save_file({key: torch.arange(8.0).reshape(4, 2)}, str(folder / "adapter_model.safetensors"))
    return folder


def model(tmp_path, arch: str, text_config: bool):
    folder = tmp_path / "model"
    folder.mkdir()
    config = {"architectures": [arch], **({"text_config": {"hidden_size": 2}} if text_config else {})}
    (folder / "config.json").write_text(json.dumps(config))
    return folder


def test_qwen35_wrapper_gets_language_model_keys_in_a_copy(tmp_path):
    src = adapter(tmp_path)
    out = adapter_for_engine(model(tmp_path, "Qwen3_5ForConditionalGeneration", True), src)
    assert out == tmp_path / "v1.vllm"
    renamed = load_file(str(out / "adapter_model.safetensors"))
    assert list(renamed) == ["base_model.model.model.language_model.layers.0.self_attn.q_proj.lora_A.weight"]
    assert torch.equal(next(iter(renamed.values())), torch.arange(8.0).reshape(4, 2))
    assert (out / "adapter_config.json").read_text() == (src / "adapter_config.json").read_text()
    assert list(load_file(str(src / "adapter_model.safetensors"))) == [KEY]  # the published one is untouched


def test_plain_causal_lm_and_already_wrapped_keys_are_served_as_they_are(tmp_path):
    assert (
        adapter_for_engine(model(tmp_path, "Qwen3ForCausalLM", False), adapter(tmp_path)) == tmp_path / "v1"
    )
    wrapped = tmp_path / "w"
    wrapped.mkdir()
    src = adapter(wrapped, "base_model.model.model.language_model.layers.0.mlp.up_proj.lora_A.weight")
    assert adapter_for_engine(model(wrapped, "Qwen3_5ForConditionalGeneration", True), src) == src


def test_the_vllm_backend_prepares_the_renamed_copy_ahead_and_its_load_then_reads_it_as_it_is(tmp_path):
    backend = VllmBackend(model(tmp_path, "Qwen3_5ForConditionalGeneration", True))
    ready = backend.prepare_adapter(adapter(tmp_path))
    assert ready == tmp_path / "v1.vllm" and backend.version == 0  # no engine started, nothing served
    before = (ready / "adapter_model.safetensors").stat().st_mtime_ns
    assert adapter_for_engine(backend.model, ready) == ready  # what load_adapter does first: no new copy
    assert (ready / "adapter_model.safetensors").stat().st_mtime_ns == before
