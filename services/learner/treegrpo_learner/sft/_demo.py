"""The demo policy: a small local model, fine-tuned on the seed corpus, cached on disk.

`prepare_demo_policy(out_dir)` is what the run orchestrator calls before `make demo`'s rounds:
it builds the model (a line-level tokenizer trained on the corpus, the prompt templates and some
stdlib, so a script is ~190 tokens), fine-tunes every weight on the corpus pairs, and returns the
folder to hand the sampler and learner as their base model. A second call with the same inputs
returns the cached folder at once (the fingerprint covers the corpus, the templates, the model
size and the SFT config).
"""

from __future__ import annotations

import hashlib
import json
from importlib.abc import Traversable
from pathlib import Path

from treegrpo_learner.sft._corpus import corpus_dir
from treegrpo_learner.sft.config import SftConfig

# A size between the builder's "tiny" (too small to hold the corpus) and "small" (13M params:
# too slow to fine-tune on 2 CPU cores). Registered here until `treegrpo model init` offers it.
DEMO_SIZE = "demo"
DEMO_SHAPE = dict(hidden=192, layers=3, heads=3, kv_heads=1, intermediate=512)
# The tokenizer is pre-split at newlines (a recurring line of the corpus or the templates is one
# token: a script is ~190 tokens, not ~660) and pairs that share a prompt forward it once.
DEMO_TOKENIZER = dict(vocab_size=8192, tokenizer_bytes=2 << 20, tokenizer_split="lines")
# 280 steps of <= 4,096 forwarded tokens: ~3.5 min on 2 CPU cores, after which the embedded
# default's first round failed 6-17% of nodes over five runs (docs/PERFORMANCE.md). Improve pairs
# come as a few parents with several better children each, so each improve prompt is forwarded
# once per batch. The device is the GPU when there is one.
DEMO_SFT = dict(
    max_steps=280,
    lr=3e-3,
    batch_tokens=4096,
    warmup_steps=10,
    torch_threads=0,
    corpus={"improve_parents": 4, "improve_children": 4, "debug": True, "draft_repeats": 2},
)


def _register_size() -> None:
    from treegrpo.models import SIZES, ModelSize

    SIZES.setdefault(DEMO_SIZE, ModelSize(**DEMO_SHAPE))


def tokenizer_text(cfg: SftConfig) -> list[Traversable]:
    """What the tokenizer learns its merges from, beside some standard library: the corpus and the
    prompt templates, so their recurring lines become single tokens."""
    from treegrpo.prompts import builtin_templates

    return [*sorted(corpus_dir(cfg.corpus.path).glob("*-mini/*.py")), *builtin_templates()]


def fingerprint(cfg: SftConfig, size: str) -> str:
    h = hashlib.sha256()
    for path in [corpus_dir(cfg.corpus.path) / "manifest.json", *tokenizer_text(cfg)]:
        h.update(path.name.encode())
        h.update(path.read_bytes())
    h.update(
        json.dumps(
            [
                size,
                DEMO_SHAPE,
                DEMO_TOKENIZER,
                cfg.model_dump(
                    mode="json", exclude={"nats", "telemetry", "model", "out_dir", "device", "torch_threads"}
                ),
            ],
            sort_keys=True,
        ).encode()
    )
    return h.hexdigest()[:16]


def prepare_demo_policy(
    out_dir: str | Path, *, size: str = DEMO_SIZE, overrides: dict | None = None, show_progress: bool = True
) -> Path:
    """Build + SFT the demo policy under `out_dir` (cached); return the fine-tuned model folder."""
    import asyncio

    from treegrpo.models import build_model
    from treegrpo_learner.sft._run import build_pairs
    from treegrpo_learner.sft._train import train_sft

    _register_size()
    out = Path(out_dir).expanduser()
    import torch

    defaults = {**DEMO_SFT, "device": "cuda" if torch.cuda.is_available() else "cpu"}
    cfg = SftConfig(**{**defaults, **(overrides or {})})
    key = fingerprint(cfg, size)
    sft_dir = out / f"sft-{key}"
    if (sft_dir / "sft_meta.json").is_file():
        return sft_dir
    base = out / f"base-{size}-{DEMO_TOKENIZER['tokenizer_split']}"
    if not (base / "config.json").is_file():
        build_model(base, size=size, extra_text=tokenizer_text(cfg), **DEMO_TOKENIZER)
    pairs = asyncio.run(build_pairs(cfg, use_corpus=True))
    train_sft(cfg, pairs, base, sft_dir, show_progress=show_progress)
    (out / "latest").unlink(missing_ok=True)
    (out / "latest").symlink_to(sft_dir.name)
    return sft_dir
