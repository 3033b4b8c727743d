"""The SFT loop: tokenise pairs (loss on completion tokens only), batch by a token budget,
AdamW with warm-up and cosine decay, progress on the console, a loss curve at the end.

`method = full` trains every weight (the small local model); `method = lora` trains a peft
adapter (a large model) and either merges it into a full model folder or writes the adapter.
The result is written to a scratch folder and renamed into place, so a reader never sees half
a model.
"""

from __future__ import annotations

import json
import math
import random
import shutil
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path

from treegrpo_learner.sft._batches import Example, batch_loss, make_batches
from treegrpo_learner.sft._batches import encode as encode_messages
from treegrpo_learner.sft._pairs import Pair
from treegrpo_learner.sft.config import SftConfig


@dataclass
class SftResult:
    out_dir: Path
    steps: int
    seconds: float
    pairs: int
    dropped_too_long: int
    tokens_trained: int
    first_loss: float
    final_loss: float
    by_mode: dict[str, int] = field(default_factory=dict)


def encode(tokenizer, pair: Pair) -> Example:
    return encode_messages(tokenizer, pair.messages, pair.completion)


def lr_factor(step: int, elapsed: float, total: int, config: SftConfig) -> float:
    """Linear warm-up, then cosine decay to lr_min_ratio over whichever budget runs out first:
    the steps, or `max_seconds` of wall time (so a time-capped run still ends at a low rate)."""
    warmup = config.warmup_steps
    if step < warmup:
        return (step + 1) / warmup
    progress = (step - warmup) / max(1, total - warmup)
    if config.max_seconds:
        progress = max(progress, elapsed / config.max_seconds)
    return config.lr_min_ratio + (1 - config.lr_min_ratio) * 0.5 * (
        1 + math.cos(math.pi * min(1.0, progress))
    )


def _load(config: SftConfig, model_dir: Path):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=getattr(torch, config.dtype)).to(
        config.device
    )
    if config.gradient_checkpointing:
        model.gradient_checkpointing_enable()
    if config.method == "lora":
        from peft import LoraConfig, get_peft_model

        torch.manual_seed(config.seed)
        targets = config.lora.target_modules
        model = get_peft_model(
            model,
            LoraConfig(
                r=config.lora.r,
                lora_alpha=config.lora.alpha,
                lora_dropout=config.lora.dropout,
                task_type="CAUSAL_LM",
                target_modules=targets,
            ),
        )
    return tokenizer, model


def train_sft(
    config: SftConfig, pairs: list[Pair], model_dir: Path, out_dir: Path, show_progress: bool = True
) -> SftResult:
    import torch

    if not pairs:
        raise ValueError("no training pairs: nothing to fine-tune on")
    if config.torch_threads:
        torch.set_num_threads(config.torch_threads)
    torch.manual_seed(config.seed)
    rng = random.Random(config.seed)
    tokenizer, model = _load(config, model_dir)
    encoded = [encode(tokenizer, p) for p in pairs]
    keep = [i for i, e in enumerate(encoded) if len(e.ids) <= config.max_seq_tokens]
    examples = [encoded[i] for i in keep]
    if not examples:
        raise ValueError(f"every pair is longer than max_seq_tokens={config.max_seq_tokens}")
    share = config.share_prompts and not config.gradient_checkpointing  # checkpointing keeps no cache
    per_epoch = len(make_batches(examples, config.batch_tokens, random.Random(0), share))
    total = config.max_steps or max(1, math.ceil(per_epoch * config.epochs))
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=config.lr, weight_decay=config.weight_decay)
    log_path = out_dir.with_name(out_dir.name + ".tmp") / "loss.jsonl"
    scratch = log_path.parent
    shutil.rmtree(scratch, ignore_errors=True)
    scratch.mkdir(parents=True)
    losses, tokens, started = [], 0, time.perf_counter()
    model.train()
    with _progress(show_progress, total) as advance, open(log_path, "w") as log:
        batches = _forever(examples, config.batch_tokens, rng, share)
        for step in range(total):
            elapsed = time.perf_counter() - started
            if config.max_seconds and elapsed >= config.max_seconds:
                break
            loss, n_tokens = batch_loss(model, next(batches), tokenizer.pad_token_id, config.device, share)
            lr = config.lr * lr_factor(step, elapsed, total, config)
            _update(opt, params, loss, lr, config.grad_clip)
            tokens += n_tokens
            losses.append(float(loss.detach()))
            log.write(
                json.dumps(
                    {
                        "step": step,
                        "loss": losses[-1],
                        "lr": lr,
                        "completion_tokens": tokens,
                        "seconds": round(time.perf_counter() - started, 2),
                    }
                )
                + "\n"
            )
            log.flush()  # the curve can be watched while it trains
            advance(losses[-1])
    seconds = time.perf_counter() - started
    _save(config, model, tokenizer, scratch)
    plot_losses(losses, scratch / "loss.png", title=f"SFT ({config.method}) on {len(examples)} pairs")
    result = SftResult(
        out_dir,
        len(losses),
        seconds,
        len(examples),
        len(pairs) - len(examples),
        tokens,
        losses[0],
        _tail_mean(losses),
        dict(Counter(pairs[i].mode for i in keep)),
    )
    meta = {
        "result": {k: (str(v) if isinstance(v, Path) else v) for k, v in asdict(result).items()},
        "base_model": str(model_dir),
        "config": config.model_dump(mode="json", exclude={"nats", "telemetry"}),
        "sources": sorted(Counter(pairs[i].source.split(":")[0] for i in keep).items()),
    }
    (scratch / "sft_meta.json").write_text(json.dumps(meta, indent=2))
    if out_dir.exists():
        shutil.rmtree(out_dir)
    scratch.rename(out_dir)
    return result


def _forever(examples: list[Example], batch_tokens: int, rng: random.Random, share: bool):
    """Batches of examples, epoch after epoch, each epoch freshly shuffled."""
    while True:
        for batch in make_batches(examples, batch_tokens, rng, share):
            yield [examples[i] for i in batch]


def _update(opt, params, loss, lr: float, grad_clip: float) -> None:
    import torch

    loss.backward()
    if grad_clip:
        torch.nn.utils.clip_grad_norm_(params, grad_clip)
    for group in opt.param_groups:
        group["lr"] = lr
    opt.step()
    opt.zero_grad(set_to_none=True)


def _tail_mean(losses: list[float], n: int = 10) -> float:
    tail = losses[-n:]
    return sum(tail) / len(tail)


def _save(config: SftConfig, model, tokenizer, folder: Path) -> None:
    if config.method == "lora" and config.merge_lora:
        model = model.merge_and_unload()
    model.save_pretrained(folder)  # lora without merge: adapter_config.json + adapter_model.safetensors
    tokenizer.save_pretrained(folder)


def plot_losses(losses: list[float], path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    ax.plot(range(len(losses)), losses, lw=0.8, alpha=0.5, label="step loss")
    k = max(1, len(losses) // 20)
    smooth = [
        sum(losses[max(0, i - k + 1) : i + 1]) / len(losses[max(0, i - k + 1) : i + 1])
        for i in range(len(losses))
    ]
    ax.plot(range(len(losses)), smooth, lw=2, label=f"mean of last {k}")
    ax.set(xlabel="optimizer step", ylabel="completion-token cross-entropy", title=title, yscale="log")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


class _progress:
    """A rich progress bar showing the running loss (or nothing, for tests)."""

    def __init__(self, enabled: bool, total: int):
        self.enabled, self.total = enabled, total

    def __enter__(self):
        if not self.enabled:
            return lambda loss: None
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )

        self._p = Progress(
            TextColumn("SFT loss {task.fields[loss]:.3f}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TimeRemainingColumn(),
        )
        self._p.__enter__()
        task = self._p.add_task("sft", total=self.total, loss=float("nan"))
        return lambda loss: self._p.update(task, advance=1, loss=loss)

    def __exit__(self, *exc):
        if self.enabled:
            self._p.__exit__(*exc)
        return False
