"""One seed-preset run on the GPU, summarised: the seed's per-step phases, per-node cost, GPU busy.

    python3 benchmarks/seed_round_summary.py OUT_DIR/<shape>   # written by tests/gpu/test_seed_presets_gpu.py

Reads `timing.jsonl` (the run's export: one line per learner step), `dmon.log` (`nvidia-smi dmon -s um
-d 1` over the whole run) and `wall.json`; prints JSON. GPU busy share = the share of the run's
seconds whose SM utilisation sample is above 0 (nvidia-smi's "sm": any kernel resident in that
second), and the mean SM utilisation; memory = the device's peak frame-buffer use.
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

NODES_PER_STEP = 64  # 1 task x E4 x G16, synchronous: one step trains one round


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
    }
    if (folder / "wall.json").exists():
        w = json.loads((folder / "wall.json").read_text())
        out["run_wall_s"] = w["ended"] - w["started"]
    return out


if __name__ == "__main__":
    print(json.dumps(main(Path(sys.argv[1])), indent=2))
