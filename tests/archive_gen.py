"""Generate a seed-format data root for tests and benchmarks (never hand-edited JSON).

    python tests/archive_gen.py OUT [--size small|seedshape|seed] [--seed N]

`seed` mirrors the seed's own root (section 2 of the seed file): the same eight run ids with the
same rounds, both node schemas (25 keys; 32 with the resource gate), a run whose last round is an
empty stub file, partial last rounds with no summary, a run with no timing.jsonl, a round whose step
was never logged, a step with save_checkpoint — 2,848 nodes, with per-token logprobs sized so the
node files total several hundred MB; `seedshape` is the same runs and rounds with short texts (a
few MB, for tests). `small` has the same odd cases at G=4 with short texts, plus a
step logged twice in timing.jsonl. Node files are written as a Python harness would
(`json.dumps`, default separators), not in our exporter's compact form.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import random
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from treegrpo.archive import parse_node, render_transcript, render_tree  # noqa: E402

T0 = 1782948274
MODEL = "/models/qwen3_5_9b"
EXC = ["ValueError", "KeyError", "FileNotFoundError", "ModuleNotFoundError", "RuntimeError", "MemoryError"]
MISS = ["gpu=0 out of range 1..1", "malformed # /// script block (unclosed or duplicated)"]


@dataclass(frozen=True)
class RunPlan:
    run_id: str
    task: str
    gate: bool
    full_rounds: int
    partial_nodes: int = 0  # a last round stopped after this many nodes (no summary)
    stub: bool = False  # a last round that is an empty node file
    timing_steps: int | None = None  # None: one line per full round; 0: no timing.jsonl
    dup_step: int = 0  # this step is logged twice
    checkpoint_step: int = 0  # this step has save_checkpoint
    more_tasks: tuple[str, ...] = ()  # further tasks run in the same rounds (the seed's runs had one)

    @property
    def tasks(self) -> tuple[str, ...]:
        return (self.task, *self.more_tasks)


SEED_PLAN = [
    RunPlan("20260701_223600", "spooky-author-identification", False, 2),
    RunPlan("20260701_231713", "spooky-author-identification", False, 10, stub=True),
    RunPlan("20260702_020809", "spooky-author-identification", False, 2, partial_nodes=30),
    RunPlan("20260702_041208", "spooky-author-identification", False, 12, timing_steps=11),
    RunPlan("20260702_073759", "spooky-author-identification", True, 3),
    RunPlan("20260702_152844", "aerial-cactus-identification", True, 10, checkpoint_step=10),
    RunPlan("20260702_183315", "plant-pathology-2020-fgvc7", True, 4, partial_nodes=17),
    RunPlan(
        "20260702_221522", "dogs-vs-cats-redux-kernels-edition", True, 0, partial_nodes=49, timing_steps=0
    ),
]
SMALL_PLAN = [
    RunPlan("s25_full", "spooky-mini", False, 2, stub=True, checkpoint_step=2),
    RunPlan("s25_partial", "spooky-mini", False, 1, partial_nodes=6, dup_step=1),
    RunPlan("s32_full", "cactus-mini", True, 2),
    RunPlan("s32_partial", "cactus-mini", True, 0, partial_nodes=5, timing_steps=0),
]


@dataclass(frozen=True)
class Size:
    group: int
    expansions: int
    tokens: int  # response tokens per node (mean)
    text: int  # characters of prompt/thinking/completion text
    tail: int = 0  # characters of program output added to term_tail (0: a one-line tail)


SIZES = {"small": Size(4, 4, 40, 200), "seedshape": Size(16, 4, 8, 60), "seed": Size(16, 4, 3200, 9000)}


def _hex(*parts: object) -> str:
    return hashlib.sha256("/".join(map(str, parts)).encode()).hexdigest()[:12]


def _text(rng: random.Random, n: int, word: str) -> str:
    words = [word, "data", "model", "train", "ünïcode", "λ", "valid", "loss", '"quote"', "tab\there"]
    out, size = [], 0
    while size < n:
        w = rng.choice(words)
        out.append(w)
        size += len(w) + 1
    return " ".join(out)


def _status(rng: random.Random, gate: bool, gpu: bool) -> str:
    if gate and gpu and rng.random() < 0.6:
        return "crashed"
    return rng.choices(
        ["crashed", "ok", "timeout", "no_code", "invalid_submission", "no_submission"],
        [70, 19, 9, 1, 0.5, 0.5],
    )[0]


def _node(
    rng, plan: RunPlan, size: Size, rnd: int, step: int, idx: int, parent, group: str, task: str
) -> dict:
    nid = _hex(plan.run_id, rnd, step, idx) if task == plan.task else _hex(plan.run_id, task, rnd, step, idx)
    mode = "draft" if parent is None else ("improve" if parent["status"] == "ok" else "debug")
    decl = _declaration(rng, plan, nid) if plan.gate else {}
    gpu = bool(decl.get("resources") and decl["resources"].get("gpu"))
    status = _status(rng, plan.gate, gpu)
    graded = status == "ok"
    metric = round(rng.uniform(0.4, 0.9), 5) if graded else None
    lower_better = "spooky" in task or "dogs" in task
    n_tok = max(1, int(rng.gauss(size.tokens, size.tokens / 5)))
    code = f"# node {nid}\nimport pandas as pd\n" + _text(rng, size.text // 3, "code")
    exc = ("GpuIdleError" if gpu else rng.choice(EXC)) if status == "crashed" else None
    rec = {
        "id": nid,
        "step": step,
        "round": rnd,
        "exp_id": task,
        "parent_id": parent["id"] if parent else None,
        "sibling_group": group,
        "mode": mode,
        "plan": "" if rng.random() < 0.3 else _text(rng, 80, "plan"),
        "code": code,
        "raw_completion": "```python\n" + code + "\n```",
        "thinking": _text(rng, size.text, "think"),
        "prompt_messages": [
            {"role": "system", "content": _text(rng, size.text // 4, "sys")},
            {"role": "user", "content": _text(rng, size.text, "task")},
        ],
        "response_token_ids": [rng.randrange(151_000) for _ in range(n_tok)],
        "response_logprobs": [-rng.expovariate(3.0) for _ in range(n_tok)],
        "exc_type": exc,
        "exec_time": round(rng.uniform(0.5, 900.0), 3),
        "term_tail": (_text(rng, size.tail, "out") + "\n" if size.tail else "")
        + (f"Traceback ...\n{exc}: boom" if exc else "val metric 0.5"),
        "is_buggy": not graded,
        "status": status,
        "grade_error": "InvalidSubmissionError: rows do not sum to 1"
        if status == "invalid_submission"
        else None,
        "test_metric": metric,
        "oriented": (-metric if lower_better else metric) if metric is not None else None,
        "reward": None,
        "source": "grade" if graded else "none",
        "n_children": 0,
    }
    rec.update(decl)
    return rec


def _declaration(rng: random.Random, plan: RunPlan, nid: str) -> dict:
    r = rng.random()
    malformed = r < 0.06
    resources = (
        None
        if malformed or r > 0.4
        else {
            "cpu": rng.choice([2, 4, 8]),
            "mem": rng.choice([8, 16]),
            "ephemeral": 4,
            "gpu": rng.choice([0, 1, 1]),
        }
    )
    miss = MISS[1] if malformed else None
    if resources and resources["gpu"] == 0 and rng.random() < 0.5:
        resources, miss = None, MISS[0]
    timings = (
        None
        if rng.random() < 0.05
        else {
            "pending": round(rng.uniform(0, 30), 3),
            "stage": 1.25,
            "exec": round(rng.uniform(1, 600), 3),
            "retrieve": 0.5,
        }
    )
    return {
        "resources": resources,
        "decl_malformed": malformed,
        "decl_miss_reason": miss,
        "decl_deps_ignored": False,
        "where": f"k8s:pq-exec-{plan.run_id.replace('_', '-')}-{nid[:6]}-a1",
        "exec_timings": timings,
        "gpu_util": round(rng.uniform(0, 90), 1) if rng.random() < 0.02 else None,
    }


def _rewards(group: list[dict], rng: random.Random) -> None:
    """The harness's rank-like reward: valid siblings in (0, 0.99) by oriented rank; failures -0.5 or -0.2."""
    valid = sorted((r for r in group if r["status"] == "ok"), key=lambda r: r["oriented"])
    for i, r in enumerate(valid):
        r["reward"] = round(0.45 + 0.5 * (i + 1) / (len(valid) + 1), 6)
    for r in group:
        if r["status"] != "ok":
            r["reward"] = -0.2 if rng.random() < 0.03 else -0.5


def _round(rng, plan: RunPlan, size: Size, rnd: int, limit: int, task: str) -> list[dict]:
    nodes: list[dict] = []
    for step in range(size.expansions):
        parent = None
        if step >= 2 and nodes:  # softmax over the round's rewards picks one parent per expansion
            weights = [math.exp(2.0 * (n["reward"] or 0.0)) for n in nodes]
            parent = rng.choices(nodes, weights)[0]
        group_id = _hex("group", plan.run_id, rnd, step, *([task] if task != plan.task else []))
        group = [_node(rng, plan, size, rnd, step, i, parent, group_id, task) for i in range(size.group)]
        _rewards(group, rng)
        nodes += group
    return nodes[:limit]


def _summary(plan: RunPlan, size: Size, rnd: int, nodes: list[dict], ts: int, task: str) -> dict:
    valid = [n for n in nodes if n["status"] == "ok"]
    best = max(valid, key=lambda n: n["oriented"], default=None)
    return {
        "exp_id": task,
        "round": rnd,
        "model": MODEL,
        "adapter_path": "",
        "nodes": len(nodes),
        "valid": len(valid),
        "expansions": size.expansions,
        "phase": "train",
        "best_test_metric": best["test_metric"] if best else None,
        "best_node_id": best["id"] if best else None,
        "honest_test_metric": None,
        "rollout_file": f"rollouts/{task}__{ts}.jsonl",
        "workspace": f"workspaces/{plan.run_id}/round_{rnd}",
        "gen_llm_seconds": round(len(nodes) * 3.7, 3),
        "gen_exec_seconds": round(len(nodes) * 11.1, 3),
    }


def _timing(rng: random.Random, step: int, checkpoint: bool) -> dict:
    phases = {
        "update_weights": rng.uniform(5, 20),
        "gen": rng.uniform(600, 2400),
        "old_log_prob": rng.uniform(10, 40),
        "ref": rng.uniform(10, 40),
        "adv": rng.uniform(0.01, 0.2),
        "update_actor": rng.uniform(60, 240),
    }
    if checkpoint:
        phases["save_checkpoint"] = rng.uniform(5, 30)
    phases = {k: round(v, 4) for k, v in phases.items()}
    return {
        "step": step,
        "total_s": round(sum(phases.values()) + rng.uniform(0.1, 1.5), 4),
        "phases_s": phases,
    }


def write_run(root: Path, plan: RunPlan, size: Size, seed: int) -> tuple[int, int]:
    rng = random.Random(f"{seed}/{plan.run_id}")
    run_dir = root / plan.run_id
    n_nodes = n_bytes = 0
    rounds = plan.full_rounds + (1 if plan.partial_nodes or plan.stub else 0)
    for rnd in range(1, rounds + 1):
        d = run_dir / f"round_{rnd}"
        d.mkdir(parents=True, exist_ok=True)
        for task in plan.tasks:
            n, b = _write_round(rng, plan, size, rnd, task, d)
            n_nodes, n_bytes = n_nodes + n, n_bytes + b
    steps = plan.full_rounds if plan.timing_steps is None else plan.timing_steps
    if steps:
        order = list(range(1, steps + 1)) + ([plan.dup_step] if plan.dup_step else [])
        lines = [_timing(rng, s, s == plan.checkpoint_step) for s in sorted(order)]
        (run_dir / "timing.jsonl").write_text("".join(json.dumps(t) + "\n" for t in lines))
    return n_nodes, n_bytes


def _write_round(rng, plan: RunPlan, size: Size, rnd: int, task: str, d: Path) -> tuple[int, int]:
    ts = T0 + 7919 * rnd + int(_hex(plan.run_id, *([task] if task != plan.task else []))[:4], 16)
    last = rnd > plan.full_rounds
    limit = 0 if last and plan.stub else (plan.partial_nodes if last else size.group * size.expansions)
    nodes = _round(rng, plan, size, rnd, limit, task) if limit else []
    data = "".join(json.dumps(n) + "\n" for n in nodes).encode()
    (d / f"{task}__{ts}.jsonl").write_bytes(data)
    if nodes:
        recs = [parse_node(n) for n in nodes]
        (d / f"{task}__{ts}__tree.txt").write_text(render_tree(recs))
        (d / f"{task}__{ts}__transcript.md").write_text(render_transcript(task, rnd, recs))
    if not last:
        done = ts + 600 + rng.randrange(600)
        (d / f"{task}__summary_{done}.json").write_text(
            json.dumps(_summary(plan, size, rnd, nodes, ts, task), indent=2)
        )
    return len(nodes), len(data)


def generate(root: str | Path, size: str = "small", seed: int = 0) -> tuple[list[RunPlan], int, int]:
    """Write the archive under `root`; returns (plans, nodes, node-file bytes)."""
    root = Path(root)
    plans = SMALL_PLAN if size == "small" else SEED_PLAN
    total_nodes = total_bytes = 0
    for plan in plans:
        n, b = write_run(root, plan, SIZES[size], seed)
        total_nodes, total_bytes = total_nodes + n, total_bytes + b
    return plans, total_nodes, total_bytes


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--size", choices=sorted(SIZES), default="small")
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    plans, nodes, size = generate(a.out, a.size, a.seed)
    print(f"{len(plans)} runs, {nodes} nodes, {size / 1e6:.1f} MB of node records under {a.out}")


if __name__ == "__main__":
    main()
