"""A small Qwen3-architecture model with random weights and a locally trained tokenizer (no hub).

The tokenizer is a byte-level BPE trained in seconds on text that exists on every machine: the
Python standard library's sources (the policy writes Python) and the prompt templates. It is
wrapped as a `PreTrainedTokenizerFast` with a ChatML chat template and `<think>` tokens, so the
whole system (sampler, SFT, learner) runs offline on the same folder.
"""

from __future__ import annotations

import json
import sysconfig
from collections.abc import Iterator
from dataclasses import dataclass
from importlib.abc import Traversable
from pathlib import Path

from treegrpo.prompts import builtin_templates

SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<think>", "</think>", "<|pad|>"]
EOS, PAD = "<|im_end|>", "<|pad|>"
# ChatML, as Qwen3 uses; the generation prompt opens the assistant turn.
CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)


@dataclass(frozen=True)
class ModelSize:
    hidden: int
    layers: int
    heads: int
    kv_heads: int
    intermediate: int


SIZES: dict[str, ModelSize] = {
    # tests: builds and samples in well under a second
    "tiny": ModelSize(hidden=64, layers=2, heads=2, kv_heads=1, intermediate=192),
    # the embedded default (~13M params): fast on 2 cores, can memorise a few hundred scripts
    "small": ModelSize(hidden=384, layers=6, heads=6, kv_heads=2, intermediate=1152),
    # a bit more capacity (~30M) for longer SFT runs
    "base": ModelSize(hidden=512, layers=8, heads=8, kv_heads=4, intermediate=1536),
}


def corpus(max_bytes: int = 12 << 20, extra: list[Traversable] | None = None) -> Iterator[str]:
    """Training text: prompt templates, any extra files, then stdlib sources up to `max_bytes`."""
    for path in [*builtin_templates(), *(extra or [])]:
        yield path.read_text(encoding="utf-8", errors="replace")
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    used = 0
    for path in sorted(stdlib.rglob("*.py")):
        if "test" in path.parts or "site-packages" in path.parts:
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue
        used += len(text)
        yield text
        if used >= max_bytes:
            return


def train_tokenizer(
    vocab_size: int = 8192,
    max_bytes: int = 12 << 20,
    extra: list[Traversable] | None = None,
    split: str = "words",
):
    """A byte-level BPE `PreTrainedTokenizerFast` with the chat template and special tokens.

    split="words": GPT-2's pre-split (merges stay inside a word), the usual choice.
    split="lines": text is pre-split at newlines only, so merges may cross spaces and a line that
    recurs in the training text becomes one token (a corpus script with its plan is ~190 tokens,
    not ~660). Any
    text still encodes (bytes are the fallback); it is what lets a 3M-parameter model learn the
    seed corpus in minutes on a CPU (docs/SFT.md)."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    if split not in ("words", "lines"):
        raise ValueError(f"split must be 'words' or 'lines', not {split!r}")
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = (
        pre_tokenizers.ByteLevel(add_prefix_space=False)
        if split == "words"
        else pre_tokenizers.Sequence(
            [
                pre_tokenizers.Split(Regex(r"[^\n]*\n?"), behavior="isolated"),
                pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
            ]
        )
    )
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=SPECIAL_TOKENS,
        show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        min_frequency=2,
    )
    tok.train_from_iterator(corpus(max_bytes, extra), trainer=trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        eos_token=EOS,
        pad_token=PAD,
        bos_token=None,
        unk_token=None,
        additional_special_tokens=["<|im_start|>", "<think>", "</think>", "<|endoftext|>"],
    )
    fast.chat_template = CHAT_TEMPLATE
    return fast


def build_model(
    out_dir: str | Path,
    size: str = "small",
    vocab_size: int = 8192,
    seed: int = 0,
    max_position: int = 8192,
    tokenizer_bytes: int = 12 << 20,
    extra_text: list[Traversable] | None = None,
    tokenizer_split: str = "words",
) -> Path:
    """Write `config.json`, `model.safetensors` and the tokenizer files of a fresh model to `out_dir`."""
    import torch
    from transformers import GenerationConfig, Qwen3Config, Qwen3ForCausalLM

    if size not in SIZES:
        raise ValueError(f"size {size!r} is not one of {sorted(SIZES)}")
    s = SIZES[size]
    out = Path(out_dir).expanduser()
    out.mkdir(parents=True, exist_ok=True)
    tokenizer = train_tokenizer(vocab_size, tokenizer_bytes, extra_text, tokenizer_split)
    config = Qwen3Config(
        vocab_size=len(tokenizer),
        hidden_size=s.hidden,
        num_hidden_layers=s.layers,
        num_attention_heads=s.heads,
        num_key_value_heads=s.kv_heads,
        head_dim=s.hidden // s.heads,
        intermediate_size=s.intermediate,
        max_position_embeddings=max_position,
        tie_word_embeddings=True,
        eos_token_id=tokenizer.convert_tokens_to_ids(EOS),
        pad_token_id=tokenizer.convert_tokens_to_ids(PAD),
        bos_token_id=None,
        rope_theta=10000.0,
        torch_dtype="float32",
    )
    torch.manual_seed(seed)
    model = Qwen3ForCausalLM(config)
    model.generation_config = GenerationConfig(
        eos_token_id=config.eos_token_id,
        pad_token_id=config.pad_token_id,
        do_sample=True,
        temperature=1.0,
        top_p=1.0,
    )
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    params = sum(p.numel() for p in model.parameters())
    (out / "treegrpo_model.json").write_text(
        json.dumps(
            {
                "size": size,
                "params": params,
                "vocab_size": len(tokenizer),
                "seed": seed,
                "tokenizer_split": tokenizer_split,
                "builder": "treegrpo model init",
            },
            indent=2,
        )
    )
    return out
