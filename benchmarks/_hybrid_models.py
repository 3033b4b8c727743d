"""The seed's hybrid models as random-weight shapes, and the FLOP count their MFU uses.

Both are `qwen3_5` text decoders (transformers 5.17 has no separate `qwen3_6` class: Qwen3.6-27B's
published config is `model_type: qwen3_5` with the `qwen3_5_text` text config below):
- `qwen35-9b`: transformers' `Qwen3_5TextConfig()` defaults, which its docstring calls the
  Qwen3.5-9B style: 32 layers (24 Gated DeltaNet + 8 gated full attention), hidden 4096,
  MLP 12288, 16 query / 4 KV heads of 256, linear heads 16 key / 32 value of 128, vocab 248,320.
- `qwen36-27b`: Qwen3.6-27B's text config: 64 layers, `full_attention_interval` 4 (48 Gated
  DeltaNet + 16 gated full attention), hidden 5120, MLP 17408, 24 query / 4 KV heads of 256,
  linear heads 16 key / 48 value of 128, conv 4, vocab 248,320, untied head, partial rotary 0.25,
  rope theta 1e7. Its MTP head (`mtp_num_hidden_layers: 1`) and vision tower are not part of
  transformers' causal LM (checkpoints' `mtp.*` weights are ignored on load) and are not built.

MFU: FLOPs per step = 6 * N * tokens + 12 * pairs * heads * head_dim per full-attention layer,
where N counts every base parameter (embeddings and LM head included, as the issue counts),
tokens are the tokens actually run through the model, and pairs are the causal (query, key)
pairs attention computes (T(T+1)/2 per root of T tokens; r*p + r(r+1)/2 for a response of r
tokens reading a shared prompt of p): forward 4 * pairs * H * d (QK^T and PV), backward twice
that. Gated DeltaNet layers count only through their projections (6N). Over 989 TFLOP/s.
"""

from __future__ import annotations

import torch

PEAK = 989e12
SHAPES: dict[str, dict] = {
    "qwen35-9b": {},
    "qwen36-27b": dict(
        hidden_size=5120,
        intermediate_size=17408,
        num_hidden_layers=64,
        num_attention_heads=24,
        num_key_value_heads=4,
        head_dim=256,
        linear_num_key_heads=16,
        linear_num_value_heads=48,
        linear_key_head_dim=128,
        linear_value_head_dim=128,
        linear_conv_kernel_dim=4,
        vocab_size=248320,
        max_position_embeddings=262144,
        rope_parameters={"rope_type": "default", "rope_theta": 10000000.0, "partial_rotary_factor": 0.25},
    ),
}
# a CPU smoke-test stand-in with the same layer pattern (the scripts' own check, not a measurement)
SHAPES["tiny"] = dict(
    hidden_size=64,
    intermediate_size=128,
    num_hidden_layers=4,
    num_attention_heads=2,
    num_key_value_heads=1,
    head_dim=32,
    linear_num_key_heads=2,
    linear_num_value_heads=4,
    linear_key_head_dim=16,
    linear_value_head_dim=16,
    vocab_size=512,
)
EXPECT = {
    "qwen35-9b": (24, 8, 4096),
    "qwen36-27b": (48, 16, 5120),
    "tiny": (3, 1, 64),
}  # DeltaNet, full, hidden


def config(shape: str):
    from transformers import Qwen3_5TextConfig

    cfg = Qwen3_5TextConfig(**SHAPES[shape], tie_word_embeddings=False, use_cache=False)
    kinds = (
        cfg.layer_types.count("linear_attention"),
        cfg.layer_types.count("full_attention"),
        cfg.hidden_size,
    )
    if kinds != EXPECT[shape] or cfg.rope_parameters["partial_rotary_factor"] != 0.25:
        raise AssertionError(f"{shape}: {kinds}, {cfg.rope_parameters}")
    cfg._attn_implementation = "tg_packed"
    return cfg


def build(shape: str, device: str, lora, checkpointing: bool = False):
    """(peft model in bf16 with float32 LoRA, N base parameters, config), random init on `device`."""
    from transformers import Qwen3_5ForCausalLM

    from treegrpo_learner._attention import register
    from treegrpo_learner._model import wrap_lora

    register()
    cfg = config(shape)
    torch.manual_seed(0)
    with torch.device(device):
        model = Qwen3_5ForCausalLM._from_config(
            cfg, dtype=torch.bfloat16 if torch.device(device).type == "cuda" else torch.float32
        )
    for p in model.parameters():
        p.requires_grad_(False)
    n = sum(p.numel() for p in model.parameters())
    if checkpointing:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    return wrap_lora(model, lora), n, cfg


def layout_work(mbs) -> tuple[int, int]:
    """(tokens run, causal attention pairs) of packed micro-batches."""
    tokens = pairs = 0
    for mb in mbs:
        if mb is None:
            continue
        lay = mb.layout
        tokens += mb.tokens
        lens = lay.seg_lens
        pairs += sum(n * (n + 1) // 2 for n in lens[: lay.n_roots])
        for p, r in zip(lay.parents, lens[lay.n_roots :], strict=True):
            pairs += r * lens[p] + r * (r + 1) // 2
    return tokens, pairs


def step_flops(cfg, n_params: int, tokens: int, pairs: int) -> float:
    full = cfg.layer_types.count("full_attention")
    return 6 * n_params * tokens + 12 * pairs * cfg.num_attention_heads * cfg.head_dim * full
