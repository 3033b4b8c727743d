"""Which LoRA target modules vLLM applies for the Qwen3.5 / Qwen3.6 dense models, and which it
accepts but ignores or rejects: a preset's LoRA targets must all be applied, or the learner trains
weights the sampler never serves (e.g. `conv1d`, which vLLM wraps but never multiplies through).

The reason, read in vLLM's source (repository vllm-project/vllm, the stored snapshot; these lines
are unchanged in the 0.26 series the GPU machine stages, as far as a CPU machine can tell):

- `vllm/model_executor/models/qwen3_5.py` (commit 00def4f8): `Qwen3_5ForCausalLMBase` and
  `Qwen3_5ForConditionalGeneration.packed_modules_mapping` pack q/k/v_proj -> qkv_proj,
  gate/up_proj -> gate_up_proj, in_proj_b/in_proj_a -> in_proj_ba; with LoRA enabled
  (`update_packed_mapping(enable_lora=True)`, and `Qwen3_5DecoderLayer` passing
  `create_in_proj_qkvz=lora_config is None`) the fused in_proj_qkvz is dropped and in_proj_qkv and
  in_proj_z are separate LoRA modules.
- `vllm/model_executor/layers/mamba/gdn_linear_attn.py` (commit 0218d050):
  `GatedDeltaNetAttention` builds in_proj_qkv (MergedColumnParallelLinear), in_proj_z
  (ColumnParallelLinear), in_proj_ba (MergedColumnParallelLinear) and out_proj (RowParallelLinear)
  and calls each in `forward`, so their LoRA deltas act; `conv1d` is a ColumnParallelLinear too, but
  `_forward_core` reads `self.conv1d.weight` straight into `causal_conv1d_fn` /
  `causal_conv1d_update`, so a LoRA on it is loaded and never applied.
- Full-attention layers (`Qwen3NextAttention`) use qkv_proj and o_proj; the MLP (`Qwen2MoeMLP` as
  `Qwen3NextMLP`) gate_up_proj and down_proj.

Names are the Hugging Face module names (what the learner's PEFT adapter targets).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

QWEN3_5_MODEL_TYPES = frozenset({"qwen3_5", "qwen3_5_text"})  # Qwen3.5 and Qwen3.6 (same classes)
QWEN3_5_ARCHITECTURES = frozenset({"Qwen3_5ForConditionalGeneration", "Qwen3_5ForCausalLM"})

APPLIED = frozenset(
    {
        # full attention
        "q_proj", "k_proj", "v_proj", "o_proj",
        # MLP
        "gate_proj", "up_proj", "down_proj",
        # Gated DeltaNet (linear attention), LoRA path: in_proj_qkv and in_proj_z apart
        "in_proj_qkv", "in_proj_z", "in_proj_b", "in_proj_a", "out_proj",
    }
)  # fmt: skip
IGNORED = {"conv1d": "wrapped by vLLM's LoRA, but its weight is read directly by the causal-conv1d kernels"}
REJECTED = {
    "in_proj_qkvz": "vLLM's fused name, absent with LoRA on (and from the Hugging Face model): "
    "target in_proj_qkv and in_proj_z",
    "in_proj_ba": "vLLM's fused name, not a Hugging Face module: target in_proj_b and in_proj_a",
}


class UnsupportedModel(ValueError):
    """Not a model whose vLLM LoRA support this module has read (only dense Qwen3.5 / Qwen3.6)."""


@dataclass(frozen=True)
class TargetCheck:
    applied: list[str]  # vLLM applies a LoRA on these
    ignored: dict[str, str]  # accepted, never applied: why
    rejected: dict[str, str]  # not a LoRA module of vLLM's model (unknown names too): why

    @property
    def ok(self) -> bool:
        return not self.ignored and not self.rejected


def _model_type(config: Mapping) -> str:
    text = config.get("text_config") or {}
    kind = config.get("model_type") or text.get("model_type") or ""
    archs = set(config.get("architectures") or [])
    if kind in QWEN3_5_MODEL_TYPES or archs & QWEN3_5_ARCHITECTURES:
        return "qwen3_5"
    raise UnsupportedModel(
        f"LoRA targets are known for dense Qwen3.5/Qwen3.6 only (model_type {sorted(QWEN3_5_MODEL_TYPES)} "
        f"or architectures {sorted(QWEN3_5_ARCHITECTURES)}); got model_type {kind!r}, {sorted(archs)}"
    )


def vllm_lora_targets(config: Mapping, targets: Iterable[str]) -> TargetCheck:
    """Sort LoRA target module names by what vLLM does with them for the model of `config` (a
    parsed config.json; or `{"model_type": ...}`). Raises UnsupportedModel for other models."""
    _model_type(config)
    applied, ignored, rejected = [], {}, {}
    for name in dict.fromkeys(targets):  # keep order, drop repeats
        if name in APPLIED:
            applied.append(name)
        elif name in IGNORED:
            ignored[name] = IGNORED[name]
        else:
            rejected[name] = REJECTED.get(name, "not a LoRA module of vLLM's Qwen3.5 model")
    return TargetCheck(applied, ignored, rejected)
