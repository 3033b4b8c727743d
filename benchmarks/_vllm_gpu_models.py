"""Models, adapters and prompts of benchmarks/sampler_vllm_gpu.py (no measurements here).

Random-init models of real shapes, built on the machine (nothing is downloaded): Qwen3-8B's
(36 x 4096, GQA 32/8, 151,936-token vocabulary, untied head) and a small Qwen3.5 saved as
`Qwen3_5ForConditionalGeneration` (vLLM's only Qwen3.5 class). The tokenizer is the sampler's own
(`train_tokenizer`), so ids past its size are sampled but not decodable: fine for throughput.

A random init has near-uniform next-token distributions (logits of std ~0.03); the final norm is
scaled so the logits have std ~3.8 and sampled tokens have logprobs of a few nats, as a trained
model's do, which is what the logprob-agreement numbers need. LoRA: rank r on every linear layer
(what the learner ships), A as peft initialises it, B ~ N(0, b_std) so each adapter visibly moves the
outputs without breaking them.
"""

from __future__ import annotations

import gc
from dataclasses import dataclass
from pathlib import Path

LORA_TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]


@dataclass(frozen=True)
class Shape:
    hidden: int
    intermediate: int
    layers: int
    heads: int
    kv_heads: int
    vocab: int
    head_dim: int = 128

    def params(self) -> int:
        attn = self.hidden * self.head_dim * (2 * self.heads + 2 * self.kv_heads)
        mlp = 3 * self.hidden * self.intermediate
        return self.layers * (attn + mlp) + 2 * self.vocab * self.hidden

    def kv_bytes_per_token(self, dtype_bytes: int = 2) -> int:
        return self.layers * self.kv_heads * self.head_dim * 2 * dtype_bytes


QWEN3_8B = Shape(hidden=4096, intermediate=12288, layers=36, heads=32, kv_heads=8, vocab=151936)
TINY = Shape(hidden=64, intermediate=192, layers=2, heads=2, kv_heads=1, vocab=9000, head_dim=32)


def _dtype(name: str):
    import torch

    return {"bfloat16": torch.bfloat16, "float32": torch.float32}[name]


def build_qwen3(out: Path, shape: Shape, device: str, dtype: str, norm_gain: float | None = None):
    """Write the model and tokenizer to `out`; return (out, the model still in memory for its adapters)."""
    import torch
    from transformers import Qwen3Config, Qwen3ForCausalLM

    from treegrpo.models import EOS, PAD, train_tokenizer

    tok = train_tokenizer(vocab_size=8192, max_bytes=1 << 20)
    cfg = Qwen3Config(
        vocab_size=shape.vocab,
        hidden_size=shape.hidden,
        intermediate_size=shape.intermediate,
        num_hidden_layers=shape.layers,
        num_attention_heads=shape.heads,
        num_key_value_heads=shape.kv_heads,
        head_dim=shape.head_dim,
        max_position_embeddings=8192,
        tie_word_embeddings=False,
        eos_token_id=tok.convert_tokens_to_ids(EOS),
        pad_token_id=tok.convert_tokens_to_ids(PAD),
        torch_dtype=dtype,
    )
    torch.manual_seed(0)
    torch.set_default_dtype(_dtype(dtype))
    try:
        with torch.device(device):
            model = Qwen3ForCausalLM(cfg)
    finally:
        torch.set_default_dtype(torch.float32)
    gain = norm_gain if norm_gain is not None else 3.0 * 64 / shape.hidden**0.5
    with torch.no_grad():
        model.model.norm.weight.fill_(gain)  # logits std ~ gain * sqrt(hidden) * 0.02
    model.save_pretrained(out)
    tok.save_pretrained(out)
    return out, model


def save_adapters(
    model, out_dir: Path, name: str, rank: int, seeds: tuple[int, ...], b_std: float
) -> list[Path]:
    """One LoRA folder per seed (bf16 if the model is), on every linear layer; the model is left bare."""
    import torch
    from peft import LoraConfig, get_peft_model

    folders = []
    cfg = LoraConfig(r=rank, lora_alpha=2 * rank, target_modules=LORA_TARGETS, lora_dropout=0.0)
    peft = get_peft_model(model, cfg)
    for seed in seeds:
        gen = torch.Generator(device="cpu").manual_seed(seed)
        with torch.no_grad():
            for mod_name, p in peft.named_parameters():
                if "lora_B" in mod_name:
                    p.copy_(torch.randn(p.shape, generator=gen) * b_std)
                elif "lora_A" in mod_name:
                    p.copy_((torch.rand(p.shape, generator=gen) * 2 - 1) / p.shape[1] ** 0.5)
        folder = out_dir / f"{name}-lora{seed}"
        peft.save_pretrained(folder)
        folders.append(folder)
    peft.unload()
    return folders


def free(*objs) -> None:
    import torch

    del objs
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def long_prompts(model_dir: Path, count: int, tokens: int) -> list[list[dict[str, str]]]:
    """`count` distinct chat prompts of ~`tokens` tokens: a task text made of different stdlib sources."""
    import sysconfig

    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(model_dir)
    sources = sorted(Path(sysconfig.get_paths()["stdlib"]).glob("*.py"), key=lambda p: p.name)
    prompts = []
    for path in sources:
        ids = tok(path.read_text(errors="replace"), add_special_tokens=False)["input_ids"]
        if len(ids) < tokens:
            continue
        body = tok.decode(ids[: tokens - 40])
        prompts.append(
            [
                {"role": "system", "content": "You are an ML engineer. Write one Python script."},
                {"role": "user", "content": f"Improve this solution:\n```python\n{body}\n```"},
            ]
        )
        if len(prompts) == count:
            return prompts
    raise RuntimeError(f"fewer than {count} stdlib sources of {tokens} tokens")


def build_qwen35(out: Path, device: str) -> Path:
    """A small Qwen3.5 (3 linear-attention layers + 1 full) saved as the ConditionalGeneration wrapper."""
    import torch
    from transformers import Qwen3_5Config, Qwen3_5ForConditionalGeneration

    from treegrpo.models import train_tokenizer

    tok = train_tokenizer(vocab_size=4096, max_bytes=1 << 20)
    text = dict(
        vocab_size=8192,
        hidden_size=512,
        intermediate_size=1536,
        num_hidden_layers=4,
        num_attention_heads=8,
        num_key_value_heads=2,
        head_dim=64,
        linear_num_key_heads=4,
        linear_num_value_heads=8,
        linear_key_head_dim=64,
        linear_value_head_dim=64,
        layer_types=["linear_attention"] * 3 + ["full_attention"],
        max_position_embeddings=4096,
        eos_token_id=tok.eos_token_id,
        tie_word_embeddings=False,
    )
    vision = dict(depth=1, hidden_size=64, intermediate_size=128, num_heads=2, out_hidden_size=512)
    cfg = Qwen3_5Config(text_config=text, vision_config=vision, tie_word_embeddings=False)
    torch.manual_seed(0)
    model = Qwen3_5ForConditionalGeneration(cfg).to(device=device, dtype=torch.bfloat16)
    with torch.no_grad():
        model.model.language_model.norm.weight.fill_(6.0)
    model.save_pretrained(out)
    tok.save_pretrained(out)
    free(model)
    return out


def qwen35_causal_adapter(model_dir: Path, out: Path, device: str, rank: int = 16) -> Path:
    """An adapter trained the learner's way (AutoModelForCausalLM): keys `base_model.model.model.layers.*`."""
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.bfloat16).to(device)
    folder = save_adapters(model, out.parent, out.name, rank, (7,), b_std=0.05)[0]
    free(model)
    return folder
