"""SFT step time on the seed corpus's draft pairs: completion-only LM head vs full logits.

    python benchmarks/sft_step.py --model DIR [--steps 3] [--device cpu] [--threads 2]

One optimizer step = a batch of 8,192 padded tokens of real draft pairs (sampler prompt + corpus
script), forward + backward + AdamW. Baseline, measured in the same run, interleaved step by step:
the HF way (`model(..., labels=...)`, logits for every position). Prints one JSON line.
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

    from services.learner.sft._corpus import corpus_pairs
    from services.learner.sft._train import _collate, completion_loss, encode, make_batches
    from services.learner.sft.config import CorpusSettings
    from services.sampler.config import PromptSettings

    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    tok = AutoTokenizer.from_pretrained(args.model)
    model = AutoModelForCausalLM.from_pretrained(args.model).to(args.device)
    pairs = corpus_pairs(CorpusSettings(improve_per_script=0, debug=False), PromptSettings())
    ex = [encode(tok, p) for p in pairs]
    batches = make_batches(ex, 8192, random.Random(0))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    times: dict[str, list[float]] = {"completion_head": [], "full_logits": []}
    for i in range(args.steps):
        ids, mask, labels = _collate([ex[j] for j in batches[i % len(batches)]], tok.pad_token_id, args.device)
        for name in times:
            t = time.perf_counter()
            if name == "full_logits":
                loss = model(input_ids=ids, attention_mask=mask, labels=labels).loss
            else:
                loss = completion_loss(model, ids, mask, labels)
            loss.backward()
            opt.step()
            opt.zero_grad()
            if args.device.startswith("cuda"):
                torch.cuda.synchronize()
            times[name].append(time.perf_counter() - t)
    med = {k: statistics.median(v) for k, v in times.items()}
    print(json.dumps({"device": args.device, "threads": args.threads, "steps": args.steps,
                      "params": sum(p.numel() for p in model.parameters()),
                      "step_s": med, "speedup": med["full_logits"] / med["completion_head"]}))


if __name__ == "__main__":
    main()
