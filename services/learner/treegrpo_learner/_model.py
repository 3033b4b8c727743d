"""The policy: a frozen base model with a trainable LoRA adapter (peft), packed-attention ready."""

from __future__ import annotations

import contextlib
import logging
from pathlib import Path

import torch

from treegrpo_learner._attention import register as register_packed_attention
from treegrpo_learner._gdn import install as install_gdn

log = logging.getLogger(__name__)
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}


def lora_config(s):
    from peft import LoraConfig

    # peft's "all-linear": every nn.Linear but the LM head (Qwen3.5's linear-attention projections too)
    targets = "all-linear" if s.target_modules == "all-linear" else list(s.target_modules)
    return LoraConfig(
        r=s.r,
        lora_alpha=s.alpha,
        lora_dropout=s.dropout,
        target_modules=targets,
        bias="none",
        task_type="CAUSAL_LM",
    )


def wrap_lora(base: torch.nn.Module, s, adapter_dir: str | Path | None = None):
    """Attach a fresh adapter (or load one from `adapter_dir`); LoRA weights are kept in float32.

    `s` has r, alpha, dropout, target_modules (a LoraSettings or any object alike)."""
    from peft import PeftModel, get_peft_model

    if adapter_dir is not None:
        model = PeftModel.from_pretrained(base, str(adapter_dir), is_trainable=True)
    else:
        model = get_peft_model(base, lora_config(s))
    for p in model.parameters():
        if p.requires_grad and p.dtype != torch.float32:
            p.data = p.data.float()
    return model


def load_base(path: str | Path, dtype: str = "float32", device: str = "cpu"):
    from transformers import AutoModelForCausalLM

    register_packed_attention()
    model = AutoModelForCausalLM.from_pretrained(
        str(path), dtype=DTYPES[dtype], attn_implementation="tg_packed"
    )
    model.to(device)
    model.config.use_cache = False
    for p in model.parameters():
        p.requires_grad_(False)
    return model


def parts(model) -> tuple[torch.nn.Module, torch.Tensor]:
    """(decoder stack returning hidden states, LM head weight) of a peft-wrapped causal LM."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    decoder = base.model if hasattr(base, "model") else base.get_decoder()
    if hasattr(decoder, "language_model"):  # multimodal wrappers (Qwen3.5 ConditionalGeneration)
        decoder = decoder.language_model
    head = base.lm_head
    if getattr(head, "bias", None) is not None:
        raise ValueError("LM heads with a bias are not supported")
    return decoder, head.weight


class PackedPolicy(torch.nn.Module):
    """Decoder stack + chunked LM head as one module: what a step calls per micro-batch. Sharded
    with FSDP, its forward is the root unit that gathers embeddings, final norm and LM head."""

    def __init__(self, model, gdn_backend: str = "auto"):
        super().__init__()
        base = model.get_base_model() if hasattr(model, "get_base_model") else model
        self.decoder, _ = parts(model)
        self.head = base.lm_head
        # linear-attention layers (Qwen3.5/3.6) learn the packed layout; None for other models
        self.gdn_backend = install_gdn(model, gdn_backend)

    def forward(self, input_ids, position_ids, rows, targets, chunk: int, layout):
        from treegrpo_learner._logprobs import chunked_logprobs

        out = self.decoder(input_ids=input_ids, position_ids=position_ids, use_cache=False, tg_layout=layout)
        flat = out.last_hidden_state.reshape(-1, out.last_hidden_state.shape[-1])
        return chunked_logprobs(flat.index_select(0, rows), self.head.weight, targets, chunk)


def adapter_disabled(model):
    """Context in which the model is the reference (base) policy: no second model in memory."""
    if hasattr(model, "disable_adapter"):
        return model.disable_adapter()
    return contextlib.nullcontext()


def tiny_qwen3(
    vocab: int = 96,
    hidden: int = 32,
    layers: int = 2,
    heads: int = 4,
    kv_heads: int = 2,
    seed: int = 0,
    dtype: torch.dtype = torch.float32,
):
    """A random-weight Qwen3 for tests and the CPU benchmark (no hub, no tokenizer needed)."""
    from transformers import Qwen3Config, Qwen3ForCausalLM

    register_packed_attention()
    cfg = Qwen3Config(
        vocab_size=vocab,
        hidden_size=hidden,
        intermediate_size=hidden * 3,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=kv_heads,
        head_dim=hidden // heads,
        max_position_embeddings=4096,
        tie_word_embeddings=False,
        attn_implementation="tg_packed",
        use_cache=False,
    )
    torch.manual_seed(seed)
    model = Qwen3ForCausalLM(cfg).to(dtype)
    for p in model.parameters():
        p.requires_grad_(False)
    return model


def tiny_qwen35(
    vocab: int = 64,
    hidden: int = 32,
    layer_types: tuple[str, ...] = ("linear_attention", "full_attention", "linear_attention"),
    seed: int = 0,
    dtype: torch.dtype = torch.float32,
):
    """A random-weight Qwen3.5-shaped hybrid (Gated DeltaNet + gated full attention, partial rotary,
    grouped value heads) for tests and the CPU benchmark."""
    from transformers import Qwen3_5ForCausalLM, Qwen3_5TextConfig

    register_packed_attention()
    cfg = Qwen3_5TextConfig(
        vocab_size=vocab,
        hidden_size=hidden,
        intermediate_size=hidden * 2,
        num_hidden_layers=len(layer_types),
        layer_types=list(layer_types),
        num_attention_heads=2,
        num_key_value_heads=1,
        head_dim=16,
        linear_num_key_heads=2,
        linear_num_value_heads=4,
        linear_key_head_dim=8,
        linear_value_head_dim=8,
        tie_word_embeddings=False,
        use_cache=False,
    )
    cfg._attn_implementation = "tg_packed"
    torch.manual_seed(seed)
    model = Qwen3_5ForCausalLM(cfg).to(dtype)
    for p in model.parameters():
        p.requires_grad_(False)
    return model


def save_tiny(path: str | Path, **kw) -> Path:
    """Write a tiny random Qwen3 as a model folder the learner can load by path."""
    p = Path(path)
    m = tiny_qwen3(**kw)
    m.config.attn_implementation = "sdpa"
    m.save_pretrained(p)
    return p


def keep_input_dtype(model) -> None:
    """Under bf16 autocast, stop peft casting each LoRA input to the adapter's float32: the cast
    copy would be saved for backward beside the base layer's own input (a third more activation
    memory on an 8B model); autocast runs the small LoRA matmuls in bf16 from the shared input."""
    from peft.tuners.tuners_utils import BaseTunerLayer

    for module in model.modules():
        if isinstance(module, BaseTunerLayer):
            module.cast_input_dtype_enabled = False
