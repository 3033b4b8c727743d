"""One seed-preset run on the GPU, summarised: the seed's per-step phases, per-node cost, GPU busy.

    python3 benchmarks/seed_round_summary.py OUT_DIR/<shape>   # written by tests/gpu/test_seed_presets_gpu.py

Reads `timing.jsonl` (the run's export: one line per learner step), `dmon.log` (`nvidia-smi dmon -s um
-d 1` over the whole run), `wall.json` and the learner's log (its per-step tokens forwarded and
seconds: the in-loop MFU); prints JSON. GPU busy share = the share of the run's
seconds whose SM utilisation sample is above 0 (nvidia-smi's "sm": any kernel resident in that
second), and the mean SM utilisation; memory = the device's peak frame-buffer use.
"""

from __future__ import annotations

import json
import re
import statistics
import sys
from pathlib import Path

NODES_PER_STEP = 64  # 1 task x E4 x G16, synchronous: one step trains one round
PEAK = 989e12  # H100/H200 dense bf16, as benchmarks/_hybrid_models.py counts MFU
PARAMS = {"qwen35-9b": 8_953_803_264, "qwen36-27b": 26_895_998_464}  # `treegrpo model init --shape`
# the learner's line per step (services/learner/treegrpo_learner/_trainer.py)
STEP_LINE = re.compile(r"step: (\d+) of (\d+) sequences trained, (\d+) tokens forwarded in ([\d.]+) s")


def learner_steps(folder: Path) -> list[dict]:
    """Per step: tokens the update forwarded, its seconds, tok/s and MFU (6 N per token; the
    attention term is <1 % at these lengths), in the order the learner logged them."""
    rows = []
    n = PARAMS.get(folder.name)
    for log in sorted(folder.glob("learner*")):
        for m in STEP_LINE.finditer(log.read_text(errors="replace")):
            tokens, seconds = int(m.group(3)), float(m.group(4))
            row = {"sequences_trained": int(m.group(1)), "tokens_forwarded": tokens, "update_s": seconds}
            row["tokens_per_s"] = tokens / seconds if seconds else None
            if n and seconds:
                row["mfu"] = 6 * n * tokens / seconds / PEAK
            rows.append(row)
    return rows


def dmon(path: Path) -> dict:
    cols, sm, fb = [], [], []
    for line in path.read_text().splitlines() if path.exists() else []:
        if line.startswith("# gpu"):
            cols = line[1:].split()
        elif line.strip() and not line.startswith("#") and cols:
            row = dict(zip(cols, line.split(), strict=False))
            if row.get("sm", "-").isdigit():
                sm.append(int(row["sm"]))
            if row.get("fb", "-").isdigit():
                fb.append(int(row["fb"]))
    if not sm:
        return {}
    return {
        "seconds": len(sm),
        "busy_share": sum(v > 0 for v in sm) / len(sm),
        "sm_mean": statistics.fmean(sm),
        "fb_peak_gib": max(fb) / 1024 if fb else None,
    }


def main(folder: Path) -> dict:
    lines = (folder / "timing.jsonl").read_text().splitlines() if (folder / "timing.jsonl").exists() else []
    steps = [json.loads(x) for x in lines if x.strip()]
    phases = sorted({k for s in steps for k in s["phases_s"]})
    out = {
        "steps": steps,
        "median_phases_s": {p: statistics.median(s["phases_s"].get(p, 0.0) for s in steps) for p in phases},
        "per_node_s": [s["total_s"] / NODES_PER_STEP for s in steps],
        "gpu": dmon(folder / "dmon.log"),
        "learner": learner_steps(folder),
    }
    if (folder / "wall.json").exists():
        w = json.loads((folder / "wall.json").read_text())
        out["run_wall_s"] = w["ended"] - w["started"]
    return out


if __name__ == "__main__":
    print(json.dumps(main(Path(sys.argv[1])), indent=2))
