"""The demo SFT recipe on a GPU (device machine), with sampled drafts at checkpoints.

Runs without pydantic (the device image lacks it): python3 benchmarks/sft_recipe_gpu.py MODEL_DIR STEPS LR BATCH_TOKENS CHECKS
with .gpuexp/pairs.jsonl (written from corpus_pairs) beside it; OUT=<folder> receives loss and samples.
Used for the step counts and crash rates in docs/SFT.md (2026-11-30, one H200).
"""

import json
import math
import os
import random
import sys
import tarfile
import time
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

OUT = Path(os.environ["OUT"])
mdir, total, lr, bt = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4])
checks = [int(x) for x in sys.argv[5].split(",")]
dev = "cuda"
tok = AutoTokenizer.from_pretrained(mdir)
model = AutoModelForCausalLM.from_pretrained(mdir).to(dev)
pairs = [json.loads(line) for line in open(".gpuexp/pairs.jsonl")]


def enc(p):
    pr = tok.apply_chat_template(p["messages"], add_generation_prompt=True, tokenize=True)
    pr = list(pr["input_ids"] if hasattr(pr, "keys") else pr)
    c = tok(p["completion"], add_special_tokens=False)["input_ids"]
    return pr + c + [tok.eos_token_id], len(pr)


ex = [enc(p) for p in pairs]
print(
    "mean len",
    sum(len(e[0]) for e in ex) / len(ex),
    "mean completion",
    sum(len(e[0]) - e[1] for e in ex) / len(ex),
    flush=True,
)
rng = random.Random(0)


def batches():
    order = sorted(range(len(ex)), key=lambda i: (len(ex[i][0]), rng.random()))
    out, cur, lo = [], [], 0
    for i in order:
        n = len(ex[i][0])
        if cur and max(lo, n) * (len(cur) + 1) > bt:
            out.append(cur)
            cur, lo = [], 0
        cur.append(i)
        lo = max(lo, n)
    if cur:
        out.append(cur)
    rng.shuffle(out)
    return out


opt = torch.optim.AdamW(model.parameters(), lr=lr)
sched = torch.optim.lr_scheduler.LambdaLR(
    opt,
    lambda s: (
        (s + 1) / 10
        if s < 10
        else 0.1 + 0.45 * (1 + math.cos(math.pi * min(1, (s - 10) / max(1, total - 10))))
    ),
)
drafts = {}
for p in pairs:
    if p["mode"] == "draft":
        drafts.setdefault(p["task"], p["messages"])
step = 0
t0 = time.time()
TEMPS = [float(t) for t in os.environ.get("TEMPS", "1.0").split(",")]


def sample(step):
    for temp in TEMPS:
        model.eval()
        res = []
        for task, msgs in drafts.items():
            pr = tok.apply_chat_template(msgs, add_generation_prompt=True, tokenize=True)
            pr = list(pr["input_ids"] if hasattr(pr, "keys") else pr)
            ids = torch.tensor([pr] * 16, device=dev)
            with torch.no_grad():
                o = model.generate(
                    input_ids=ids,
                    attention_mask=torch.ones_like(ids),
                    do_sample=True,
                    temperature=temp,
                    top_p=1.0,
                    top_k=0,
                    max_new_tokens=1200,
                    eos_token_id=tok.eos_token_id,
                    pad_token_id=tok.pad_token_id,
                )
            for row in o[:, len(pr) :]:
                res.append({"task": task, "text": tok.decode(row, skip_special_tokens=True)})
        with open(OUT / f"samples_{Path(mdir).name}_{step}_t{temp}.jsonl", "w") as f:
            for r in res:
                f.write(json.dumps(r) + "\n")
        model.train()


losses = []
while step < total:
    for b in batches():
        w = max(len(ex[i][0]) for i in b)
        ids = torch.full((len(b), w), tok.pad_token_id)
        mask = torch.zeros_like(ids)
        lab = torch.full_like(ids, -100)
        for r, i in enumerate(b):
            s, n = ex[i]
            ids[r, : len(s)] = torch.tensor(s)
            mask[r, : len(s)] = 1
            lab[r, n : len(s)] = ids[r, n : len(s)]
        loss = model(input_ids=ids.to(dev), attention_mask=mask.to(dev), labels=lab.to(dev)).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        opt.zero_grad()
        losses.append(loss.item())
        step += 1
        if step % 25 == 0:
            print(step, sum(losses[-25:]) / 25, round(time.time() - t0, 1), flush=True)
        if step in checks:
            sample(step)
        if step >= total:
            break
json.dump(losses, open(OUT / f"losses_{Path(mdir).name}.json", "w"))
model.save_pretrained("/tmp/m")
tok.save_pretrained("/tmp/m")

t = tarfile.open(OUT / f"m_{Path(mdir).name}.tgz", "w:gz")
t.add("/tmp/m", arcname="m")
t.close()
