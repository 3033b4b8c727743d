"""Which LoRA targets vLLM applies for Qwen3.5 / Qwen3.6 (the presets' targets are checked by it)."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from treegrpo_sampler.backends import UnsupportedModel, vllm_lora_targets

pytestmark = pytest.mark.timeout(5)
ISSUE_TARGETS = [
    "q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj",
    "in_proj_qkv", "in_proj_z", "in_proj_b", "in_proj_a", "out_proj",
]  # fmt: skip
QWEN35_CONFIG = {
    "architectures": ["Qwen3_5ForConditionalGeneration"],
    "model_type": "qwen3_5",
    "text_config": {"model_type": "qwen3_5_text"},
}


def test_the_targets_of_the_measured_run_are_all_applied():
    check = vllm_lora_targets(QWEN35_CONFIG, ISSUE_TARGETS)
    assert check.ok and check.applied == ISSUE_TARGETS


@pytest.mark.parametrize(
    "preset", ["seed-qwen35-9b-h200.toml", "seed-qwen36-27b-h200.toml", "seed-qwen35-9b-h100.toml"]
)
def test_every_lora_target_of_the_seed_presets_is_one_vllm_applies(preset):
    # read as TOML: the presets are files a user edits, and the learner config's layout is not the point
    text = (Path(__file__).resolve().parents[2] / "treegrpo" / "examples" / preset).read_text()
    targets = tomllib.loads(text)["learner"]["lora"]["target_modules"]
    check = vllm_lora_targets(QWEN35_CONFIG, targets)
    assert check.ok, (check.ignored, check.rejected)
    assert sorted(check.applied) == sorted(ISSUE_TARGETS)


def test_conv1d_is_accepted_but_ignored_and_vllms_fused_names_are_rejected():
    check = vllm_lora_targets(
        {"model_type": "qwen3_5_text"}, ["q_proj", "conv1d", "in_proj_qkvz", "in_proj_ba", "lm_x"]
    )
    assert check.applied == ["q_proj"] and not check.ok
    assert list(check.ignored) == ["conv1d"] and "causal-conv1d" in check.ignored["conv1d"]
    assert list(check.rejected) == ["in_proj_qkvz", "in_proj_ba", "lm_x"]
    assert "in_proj_qkv and in_proj_z" in check.rejected["in_proj_qkvz"]


def test_a_causal_lm_architecture_alone_is_recognised_and_other_models_are_refused():
    assert vllm_lora_targets({"architectures": ["Qwen3_5ForCausalLM"]}, ["o_proj", "o_proj"]).applied == [
        "o_proj"
    ]
    with pytest.raises(UnsupportedModel, match="qwen3_next"):
        vllm_lora_targets({"model_type": "qwen3_next"}, ["q_proj"])
