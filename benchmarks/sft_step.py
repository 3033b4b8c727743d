"""SFT throughput on the seed corpus's draft pairs: shared-prompt batches vs packed pairs.

    python benchmarks/sft_step.py --model DIR [--steps 4] [--device cpu] [--threads 2]

One optimizer step = forward + backward + AdamW on a batch of at most 8,192 forwarded tokens of
real draft pairs (the sampler's prompt + a corpus script). Baseline, measured in the same run,
interleaved step by step: the packed HF way (each pair whole, `model(..., labels=...)`). The
figure of merit is completion tokens trained per second, since the two batchings put different
numbers of pairs in a step. Prints one JSON line.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main() -> None:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from treegrpo.prompts import PromptSettings
    from treegrpo_learner.sft._batches import batch_loss, make_batches
    from treegrpo_learner.sft._corpus import corpus_pairs
    from treegrpo_learner.sft._train import encode
    from treegrpo_learner.sft.config import CorpusSettings

    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    tok = AutoTokenizer.from_pretrained(args.model)
    model = AutoModelForCausalLM.from_pretrained(args.model).to(args.device)
    pairs = corpus_pairs(CorpusSettings(improve_per_script=0, debug=False), PromptSettings())
    ex = [encode(tok, p) for p in pairs]
    plans = {
        "shared": make_batches(ex, 8192, random.Random(0), True),
        "packed": make_batches(ex, 8192, random.Random(0), False),
    }
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    rate: dict[str, list[float]] = {name: [] for name in plans}
    for i in range(args.steps):
        for name, batches in plans.items():
            batch = [ex[j] for j in batches[i % len(batches)]]
            t = time.perf_counter()
            loss, n = batch_loss(model, batch, tok.pad_token_id, args.device, name == "shared")
            loss.backward()
            opt.step()
            opt.zero_grad()
            if args.device.startswith("cuda"):
                torch.cuda.synchronize()
            rate[name].append(n / (time.perf_counter() - t))
    med = {k: round(statistics.median(v)) for k, v in rate.items()}
    print(
        json.dumps(
            {
                "device": args.device,
                "threads": args.threads,
                "steps": args.steps,
                "params": sum(p.numel() for p in model.parameters()),
                "completion_tokens_per_s": med,
                "speedup": round(med["shared"] / med["packed"], 2),
            }
        )
    )


if __name__ == "__main__":
    main()
