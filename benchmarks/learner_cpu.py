"""Learner step on the CPU: packed + chunked step against the naive padded full-logits step.

    .venv/bin/python benchmarks/learner_cpu.py [--steps 5] [--threads 2]

A small random Qwen3 (hidden 128, 4 layers, vocab 4096) with LoRA r32 on all linear layers and
16 sequences of U(32, 256) tokens: what the embedded default trains on a laptop. Prints the median
step time of both variants, measured in the same process, and their ratio.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from pathlib import Path
from types import SimpleNamespace

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

from treegrpo_learner._model import tiny_qwen3, wrap_lora  # noqa: E402
from treegrpo_learner._trainer import PolicyTrainer, TrainerSettings, TrainSample  # noqa: E402


def samples(n: int, vocab: int, seed: int = 0) -> list[TrainSample]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        length = rng.randint(32, 256)
        ids = [rng.randrange(vocab) for _ in range(length)]
        p = length // 4
        out.append(TrainSample("g", f"n{i}", tuple(ids[:p]), tuple(ids[p:]), (), 1.0 if i % 2 else -1.0))
    return out


def naive(model, batch: list[TrainSample], opt) -> None:
    opt.zero_grad(set_to_none=True)
    width = max(len(s.prompt_ids) + len(s.response_ids) for s in batch)
    ids = torch.zeros(len(batch), width, dtype=torch.long)
    mask = torch.zeros(len(batch), width)
    for j, s in enumerate(batch):
        seq = list(s.prompt_ids) + list(s.response_ids)
        ids[j, : len(seq)] = torch.tensor(seq)
        mask[j, len(s.prompt_ids) : len(seq)] = 1
    adv = torch.tensor([[s.advantage] for s in batch])
    logits = model(input_ids=ids).logits.float()
    logp = torch.log_softmax(logits, -1)[:, :-1].gather(2, ids[:, 1:, None]).squeeze(2)
    loss = -(adv * torch.exp(logp - logp.detach()) * mask[:, 1:]).sum() / mask.sum()
    loss.backward()
    opt.step()


def median_time(fn, steps: int) -> float:
    fn()
    times = []
    for _ in range(steps):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    vocab = 4096
    model = wrap_lora(
        tiny_qwen3(vocab=vocab, hidden=128, layers=4, heads=4, kv_heads=2),
        SimpleNamespace(r=32, alpha=32.0, dropout=0.0, target_modules="all-linear"),
    )
    batch = samples(16, vocab)
    tokens = sum(len(s.prompt_ids) + len(s.response_ids) for s in batch)
    trainer = PolicyTrainer(model, TrainerSettings(micro_batch_tokens=4096, lr=1e-5))
    ours = median_time(lambda: trainer.step(batch), args.steps)
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-5)
    base = median_time(lambda: naive(model, batch, opt), args.steps)
    print(f"{tokens} tokens/step, torch threads {args.threads}")
    print(f"ours  (packed, chunked): {ours:.3f} s/step  {tokens / ours:8.0f} tok/s")
    print(f"naive (padded, full):    {base:.3f} s/step  {tokens / base:8.0f} tok/s")
    print(f"speed-up: {base / ours:.2f}x")


if __name__ == "__main__":
    main()
