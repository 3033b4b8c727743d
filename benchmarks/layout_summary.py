"""Summarise benchmarks/layout_gpu.sh's two arms (sync, async = --max-staleness 1) into layout.json.

Per arm, from the run's own records: the learner's steps (`learner.step` spans: the period is the
time between consecutive step ends), each round's rollout (the sibling groups' traces: from the
first sampler span of the round to the last executor/grader span of it), the learner's train time
per step (its phases without `gen`, the wait for groups), the `gen` share of the learner's time
(timing.jsonl), and the GPU's utilisation (nvidia-smi dmon: SM and memory-controller busy %).

    python3 benchmarks/layout_summary.py DIR      # reads DIR/run_<arm>.dir and DIR/dmon_<arm>.log
"""

from __future__ import annotations

import json
import statistics
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from treegrpo.telemetry import read_spans  # noqa: E402

ARMS = ("sync", "async")


def _median(xs: list[float]) -> float | None:
    return round(statistics.median(xs), 2) if xs else None


def rollouts(spans: list[dict]) -> dict[int, float]:
    """Round -> seconds from the round's first sampled group to its last graded node."""
    round_of = {
        s["trace_id"]: int(s["attributes"]["treegrpo.round"])
        for s in spans
        if s["name"] == "sampler sample group"
    }
    window: dict[int, list[int]] = defaultdict(lambda: [2**63, 0])
    for s in spans:
        r = round_of.get(s["trace_id"])
        if r is None or s["service"] == "learner":
            continue
        window[r][0] = min(window[r][0], s["start_ns"])
        window[r][1] = max(window[r][1], s["end_ns"])
    return {r: (end - start) / 1e9 for r, (start, end) in sorted(window.items())}


def dmon(path: Path) -> dict:
    sm, mem = [], []
    for line in path.read_text().splitlines() if path.is_file() else []:
        cols = line.split()
        if not cols or line.startswith("#") or not cols[1].isdigit():
            continue
        sm.append(float(cols[1]))
        mem.append(float(cols[2]) if cols[2].isdigit() else 0.0)
    return {
        "samples": len(sm),
        "sm_mean_pct": round(statistics.fmean(sm), 1) if sm else None,
        "mem_mean_pct": round(statistics.fmean(mem), 1) if mem else None,
        "sm_busy_share": round(sum(x > 0 for x in sm) / len(sm), 3) if sm else None,
    }


def arm(out: Path, name: str) -> dict:
    run_dir = Path((out / f"run_{name}.dir").read_text().strip())
    spans = [s for f in sorted((run_dir / "traces").glob("*.jsonl")) for s in read_spans(f)]
    steps = sorted((s for s in spans if s["name"] == "learner.step"), key=lambda s: s["end_ns"])
    ends = [s["end_ns"] for s in steps]
    periods = [(b - a) / 1e9 for a, b in zip(ends, ends[1:], strict=False)]
    timing = [
        json.loads(x) for f in run_dir.glob("export/*/timing.jsonl") for x in f.read_text().splitlines()
    ]
    train = [t["total_s"] - t["phases_s"].get("gen", 0.0) for t in timing]
    total = sum(t["total_s"] for t in timing) or 1e-9
    roll = rollouts(spans)
    starts = [s["start_ns"] for s in spans]
    rec = {
        "run_dir": str(run_dir),
        "steps": len(steps),
        "rounds": len(roll),
        "wall_s": round((max(s["end_ns"] for s in spans) - min(starts)) / 1e9, 1) if spans else None,
        "step_period_s": _median(periods),
        "periods_s": [round(p, 2) for p in periods],
        "rollout_s": _median(list(roll.values())),
        "rollouts_s": {r: round(v, 2) for r, v in roll.items()},
        "train_s": _median(train),
        "trains_s": [round(x, 2) for x in train],
        "gen_share": round(sum(t["phases_s"].get("gen", 0.0) for t in timing) / total, 3),
        "gpu": dmon(out / f"dmon_{name}.log"),
    }
    if rec["rollout_s"] is not None and rec["train_s"] is not None and rec["step_period_s"] is not None:
        bound = max(rec["rollout_s"], rec["train_s"])
        rec["max_rollout_train_s"] = bound
        rec["period_over_max"] = round(rec["step_period_s"] / bound, 2)
    return rec


def main() -> None:
    out = Path(sys.argv[1])
    result = {}
    for name in ARMS:
        if not (out / f"run_{name}.dir").is_file():
            continue
        try:
            result[name] = arm(out, name)
        except Exception as exc:  # one arm's missing files must not hide the other's numbers
            result[name] = {"error": f"{type(exc).__name__}: {exc}"}
    if all(result.get(n, {}).get("wall_s") for n in ARMS):
        result["async_over_sync_wall"] = round(result["async"]["wall_s"] / result["sync"]["wall_s"], 3)
    (out / "layout.json").write_text(json.dumps(result, indent=1))
    print(
        json.dumps(
            {
                n: {k: v for k, v in r.items() if not k.endswith("s_s") and k != "periods_s"}
                if isinstance(r, dict)
                else r
                for n, r in result.items()
            },
            indent=1,
        )
    )


if __name__ == "__main__":
    main()
