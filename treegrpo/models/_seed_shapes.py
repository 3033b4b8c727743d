"""The seed's two models as random-weight checkpoints of their real shapes (no hub, no download).

The seed compares Qwen3.5-9B with Qwen3.6-27B. Their weights cannot be fetched here, and for
systems measurements (memory, speed, the loop closing) the shape is what counts, not the values.
Both are hybrid `qwen3_5` decoders (Gated DeltaNet layers, every fourth layer gated full
attention). They are saved as `Qwen3_5ForConditionalGeneration`, the only Qwen3.5 class vLLM 0.26
registers (served with `language_model_only`), with a one-block vision tower; the learner loads the
same folder through `AutoModelForCausalLM` (the text model), so both sides read one checkpoint.

- `qwen35-9b`: transformers' `Qwen3_5TextConfig()` defaults (its docstring's Qwen3.5-9B style): 32
  layers (24 DeltaNet + 8 full), hidden 4096, MLP 12288, 16 query / 4 KV heads of 256.
- `qwen36-27b`: Qwen3.6-27B's published text config: 64 layers (48 + 16), hidden 5120, MLP 17408,
  24 query / 4 KV heads of 256, linear heads 16 key / 48 value of 128, partial rotary 0.25.
- `qwen35-tiny`: the same layer pattern in a few MB, for CPU tests of the same code path.

The vocabulary is the real 248,320 rows (the LM head is 1 B of the 9B's parameters): the tokenizer
is the project's small BPE with the remaining ids filled by plain tokens (`tok<N>`) that decode to
text, so anything the random model samples can be detokenized and parsed.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

REAL_VOCAB = 248_320
TEXT_SHAPES: dict[str, dict[str, Any]] = {
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
        rope_parameters={"rope_type": "default", "rope_theta": 10000000.0, "partial_rotary_factor": 0.25},
    ),
    "qwen35-tiny": dict(
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
    ),
}
VOCAB = {"qwen35-9b": REAL_VOCAB, "qwen36-27b": REAL_VOCAB, "qwen35-tiny": 0}  # 0: the BPE's own size


def padded_tokenizer(vocab_size: int, bpe_vocab: int = 8192):
    """The project's BPE tokenizer, its vocabulary filled up to `vocab_size` with decodable tokens."""
    from tokenizers import Tokenizer
    from transformers import PreTrainedTokenizerFast

    from treegrpo.models._builder import train_tokenizer

    base = train_tokenizer(vocab_size=bpe_vocab, max_bytes=2 << 20)
    if vocab_size <= len(base):
        return base
    spec = json.loads(base.backend_tokenizer.to_str())
    vocab: dict[str, int] = spec["model"]["vocab"]
    taken = set(vocab) | {t["content"] for t in spec["added_tokens"]}
    next_id = max([*vocab.values(), *(t["id"] for t in spec["added_tokens"])]) + 1
    n = 0
    while next_id < vocab_size:
        token = f"tok{n}"  # ASCII letters and digits are their own byte-level symbols: decodable as is
        n += 1
        if token not in taken:
            vocab[token] = next_id
            next_id += 1
    fast = PreTrainedTokenizerFast(
        tokenizer_object=Tokenizer.from_str(json.dumps(spec)),
        eos_token=base.eos_token,
        pad_token=base.pad_token,
        bos_token=None,
        unk_token=None,
        additional_special_tokens=["<|im_start|>", "<think>", "</think>", "<|endoftext|>"],
    )
    fast.chat_template = base.chat_template
    return fast


def seed_config(shape: str, tokenizer):
    """The `Qwen3_5Config` (text + one-block vision tower) of one of the seed's shapes."""
    from transformers import Qwen3_5Config

    if shape not in TEXT_SHAPES:
        raise ValueError(f"shape {shape!r} is not one of {sorted(TEXT_SHAPES)}")
    text = dict(TEXT_SHAPES[shape])
    text["vocab_size"] = VOCAB[shape] or len(tokenizer)
    text["eos_token_id"] = tokenizer.eos_token_id
    text["pad_token_id"] = tokenizer.pad_token_id
    text["tie_word_embeddings"] = False
    hidden = text.get("hidden_size", 4096)
    vision = dict(depth=1, hidden_size=64, intermediate_size=128, num_heads=2, out_hidden_size=hidden)
    return Qwen3_5Config(text_config=text, vision_config=vision, tie_word_embeddings=False)


def build_seed_model(out_dir: str | Path, shape: str, device: str = "cpu", seed: int = 0) -> Path:
    """Write a random bf16 checkpoint of `shape` with its tokenizer; weights are made on `device`."""
    import torch
    from transformers import Qwen3_5ForConditionalGeneration

    out = Path(out_dir).expanduser()
    out.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    tokenizer = padded_tokenizer(VOCAB[shape])
    cfg = seed_config(shape, tokenizer)
    torch.manual_seed(seed)
    default = torch.get_default_dtype()
    torch.set_default_dtype(torch.bfloat16)  # made in bf16: the 27B in float32 (108 GB) fits no 80 GB card
    try:
        with torch.device(device):
            model = Qwen3_5ForConditionalGeneration(cfg).to(torch.bfloat16)
    finally:
        torch.set_default_dtype(default)
    built = time.perf_counter()
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    params = sum(p.numel() for p in model.parameters())
    info = {
        "shape": shape,
        "params": params,
        "vocab_size": cfg.text_config.vocab_size,
        "seed": seed,
        "build_s": round(built - started, 1),
        "save_s": round(time.perf_counter() - built, 1),
        "builder": "treegrpo model init --shape",
    }
    (out / "treegrpo_model.json").write_text(json.dumps(info, indent=2))
    del model
    if device.startswith("cuda"):
        torch.cuda.empty_cache()
    return out
