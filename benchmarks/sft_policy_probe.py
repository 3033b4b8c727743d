"""How often does a policy's code run? Sample drafts per built-in task, run them, grade them.

    python benchmarks/sft_policy_probe.py --model DIR [--n 8] [--temperature 0.6] [--modes draft improve]

Sampling goes through the sampler's own hf backend and prompt renderer (exactly what a run
serves); each completion is parsed by the sampler's parser, run in a fresh workspace with the
task's public data (`verify_corpus.run_code`) and graded by the grader's functions. An improve
prompt's parent is the task's median corpus script. Prints a table and one JSON line:
the share of nodes whose final status is not `ok` (the report's crash rate), per task and overall.
Used for the demo policy's numbers in docs/SFT.md.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

TASKS = ["spooky-mini", "cactus-mini", "plant-mini", "dogscats-mini"]


def messages_for(task: str, mode: str, ctx, corpus) -> list[dict[str, str]]:
    from treegrpo.prompts import render_prompt

    if mode == "draft":
        return render_prompt("draft", ctx.description, ctx.data_overview)
    valid = sorted(
        (s for s in corpus if s.task == task and s.intended == "ok" and s.verified),
        key=lambda s: s.verified.oriented,
    )
    parent = valid[len(valid) // 2]
    return render_prompt("improve", ctx.description, ctx.data_overview, parent.code, parent.verified.output)


def main() -> None:
    from treegrpo.prompts import task_context
    from treegrpo.tasks import ensure_builtin_tasks
    from treegrpo_learner.sft._corpus import load_corpus
    from treegrpo_learner.sft.verify_corpus import grade_code
    from treegrpo_sampler._parse import parse_completion
    from treegrpo_sampler.backends._base import SamplingParams
    from treegrpo_sampler.backends._hf import HfBackend

    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--n", type=int, default=8, help="samples per task and mode")
    ap.add_argument("--temperature", type=float, default=0.6)
    ap.add_argument("--max-new-tokens", type=int, default=800)
    ap.add_argument("--modes", nargs="+", default=["draft"], choices=["draft", "improve"])
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    tasks = ensure_builtin_tasks(tasks=TASKS)
    corpus = load_corpus()
    backend = HfBackend(args.model, torch_threads=2)
    params = SamplingParams(max_new_tokens=args.max_new_tokens, temperature=args.temperature, seed=args.seed)
    jobs, started = [], time.perf_counter()
    for task in TASKS:
        ctx = task_context(task)
        for mode in args.modes:
            for c in backend._generate(messages_for(task, mode, ctx, corpus), args.n, params):
                jobs.append((task, mode, parse_completion(c.text).code))
    sample_s = time.perf_counter() - started
    with ThreadPoolExecutor(2) as pool:
        results = list(pool.map(lambda j: grade_code(j[2], tasks[j[0]], timeout_s=120), jobs))
    rows = [(t, m, v.status, v.test_metric) for (t, m, _), v in zip(jobs, results, strict=True)]
    failed = {
        f"{t}/{m}": sum(r[2] != "ok" for r in rows if r[:2] == (t, m)) / args.n
        for t in TASKS
        for m in args.modes
    }
    for t, m, s, v in rows:
        print(f"{t:14s} {m:8s} {s:20s} {v if v is not None else ''}")
    print(
        json.dumps(
            {
                "model": args.model,
                "temperature": args.temperature,
                "n": args.n,
                "crash_rate": round(sum(r[2] != "ok" for r in rows) / len(rows), 3),
                "by_task": failed,
                "statuses": Counter(r[2] for r in rows),
                "valid_in_every_task": all(any(r[2] == "ok" and r[0] == t for r in rows) for t in TASKS),
                "sample_s": round(sample_s, 1),
                "total_s": round(time.perf_counter() - started, 1),
            }
        )
    )


if __name__ == "__main__":
    main()
