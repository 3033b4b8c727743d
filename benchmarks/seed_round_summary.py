"""One seed-preset run on the GPU, summarised: the seed's per-step phases, per-node cost, GPU busy.

    python3 benchmarks/seed_round_summary.py OUT_DIR/<shape>   # written by tests/gpu/test_seed_presets_gpu.py

Reads `timing.jsonl` (the run's export: one line per learner step), `dmon.log` (`nvidia-smi dmon -s um
-d 1 -o DT` over the whole run), `wall.json`, `nodes.json` (round, status, reward, exec_time per node)
and the learner's log (its per-step tokens forwarded and seconds: the in-loop MFU); prints JSON.
GPU busy share = the share of the seconds whose SM utilisation sample is above 0 (nvidia-smi's "sm":
any kernel resident in that second), and the mean SM utilisation; memory = the device's peak
frame-buffer use. Over the whole run that share holds the engine's start and fla's first autotune;
`cycles` gives it per warm period instead: from one learner step's line to the next (the previous
step's checkpoint and adapter push, the engine's wake, the round's generation, the executor and
grader, the engine's sleep, the update), with the executor's time on that round's node scripts
beside it (the sum over nodes, which run 16 at a time: an upper bound on the executor's wall).
"""

from __future__ import annotations

import json
import re
import statistics
import sys
from datetime import datetime
from pathlib import Path

NODES_PER_STEP = 64  # 1 task x E4 x G16, synchronous: one step trains one round
PEAK = 989e12  # H100/H200 dense bf16, as benchmarks/_hybrid_models.py counts MFU
PARAMS = {"qwen35-9b": 8_953_803_264, "qwen36-27b": 26_895_998_464}  # `treegrpo model init --shape`
# the learner's line per step (services/learner/treegrpo_learner/_trainer.py), with the log's asctime
# in front when it has one (treegrpo.cli's logging format): when the step ended
STEP_LINE = re.compile(
    r"(?:^([\d-]{10} [\d:]{8}),\d+ [^\n]*?)?"
    r"step: (\d+) of (\d+) sequences trained, (\d+) tokens forwarded in ([\d.]+) s",
    re.M,
)

# the service's line per step: its device peak (services/learner/treegrpo_learner/service.py, on CUDA)
PEAK_LINE = re.compile(r"step (\d+): \d+ groups .*?, device peak ([\d.]+) GiB")


def learner_peaks(folder: Path) -> dict[int, float]:
    """Step -> the most the learner's allocator reserved during its update (GiB): its need beside a
    sleeping engine, for the memory plan."""
    peaks = {}
    for log in sorted(folder.glob("learner*")):
        for m in PEAK_LINE.finditer(log.read_text(errors="replace")):
            peaks[int(m.group(1))] = float(m.group(2))
    return peaks


# the learner's line per background checkpoint (services/learner/treegrpo_learner/_saving.py)
SAVE_LINE = re.compile(r"checkpoint of step (\d+) written in ([\d.]+) s, in the background")


def background_saves(folder: Path) -> dict[int, float]:
    """Step -> seconds its checkpoint took, written off the step's path (its `save_checkpoint` phase
    is only what the next step waited for)."""
    saves = {}
    for log in sorted(folder.glob("learner*")):
        for m in SAVE_LINE.finditer(log.read_text(errors="replace")):
            saves[int(m.group(1))] = float(m.group(2))
    return saves


def learner_steps(folder: Path) -> list[dict]:
    """Per step: sequences trained, tokens the update forwarded, its seconds, tok/s and MFU (6 N per
    token; the attention term is <1 % at these lengths), in the order the learner logged them; `ended`
    is the line's time where the log has one."""
    rows = []
    n = PARAMS.get(folder.name)
    for log in sorted(folder.glob("learner*")):
        for m in STEP_LINE.finditer(log.read_text(errors="replace")):
            tokens, seconds = int(m.group(4)), float(m.group(5))
            row = {"sequences_trained": int(m.group(2)), "tokens_forwarded": tokens, "update_s": seconds}
            row["tokens_per_s"] = tokens / seconds if seconds else None
            if n and seconds:
                row["mfu"] = 6 * n * tokens / seconds / PEAK
            if m.group(1):
                row["ended"] = m.group(1)
            rows.append(row)
    return rows


def dmon_samples(path: Path) -> list[dict]:
    """`nvidia-smi dmon` rows as dicts keyed by its header (`# gpu sm ...`, or `#Date Time gpu ...`
    with `-o DT`); with a Date and Time, each row's `at` is that second (local time, as the logs)."""
    cols, rows = [], []
    for line in path.read_text().splitlines() if path.exists() else []:
        if line.startswith("#"):
            names = line.lstrip("#").split()
            if "gpu" in names and "sm" in names:
                cols = names
        elif line.strip() and cols:
            row = dict(zip(cols, line.split(), strict=False))
            if "Date" in row and "Time" in row:
                row["at"] = datetime.strptime(f"{row['Date']} {row['Time']}", "%Y%m%d %H:%M:%S")
            rows.append(row)
    return rows


def busy(rows: list[dict]) -> dict:
    sm = [int(r["sm"]) for r in rows if r.get("sm", "-").isdigit()]
    fb = [int(r["fb"]) for r in rows if r.get("fb", "-").isdigit()]
    if not sm:
        return {}
    return {
        "seconds": len(sm),
        "busy_share": sum(v > 0 for v in sm) / len(sm),
        "sm_mean": statistics.fmean(sm),
        "fb_peak_gib": max(fb) / 1024 if fb else None,
    }


def cycles(rows: list[dict], steps: list[dict], nodes: list[dict]) -> list[dict]:
    """GPU busy per period between consecutive step ends (`learner_steps`' `ended`, one line a step
    in order: step k's period holds round k's generation), with the executor's seconds on round k's
    scripts."""
    ends = {
        k: datetime.strptime(s["ended"], "%Y-%m-%d %H:%M:%S")
        for k, s in enumerate(steps, start=1)
        if "ended" in s
    }
    timed = [r for r in rows if "at" in r]
    out = []
    for k in sorted(ends):
        if k - 1 not in ends:
            continue
        window = [r for r in timed if ends[k - 1] < r["at"] <= ends[k]]
        row = {"step": k, "wall_s": (ends[k] - ends[k - 1]).total_seconds(), **busy(window)}
        exec_s = [n.get("exec_time") or 0.0 for n in nodes if n.get("round") == k]
        row["exec_s_sum"] = sum(exec_s)
        row["exec_s_max"] = max(exec_s, default=0.0)
        out.append(row)
    return out


def main(folder: Path) -> dict:
    lines = (folder / "timing.jsonl").read_text().splitlines() if (folder / "timing.jsonl").exists() else []
    steps = [json.loads(x) for x in lines if x.strip()]
    phases = sorted({k for s in steps for k in s["phases_s"]})
    rows = dmon_samples(folder / "dmon.log")
    nodes = json.loads((folder / "nodes.json").read_text()) if (folder / "nodes.json").exists() else []
    learned = learner_steps(folder)
    out = {
        "steps": steps,
        "median_phases_s": {p: statistics.median(s["phases_s"].get(p, 0.0) for s in steps) for p in phases},
        "per_node_s": [s["total_s"] / NODES_PER_STEP for s in steps],
        "gpu": busy(rows),
        "cycles": cycles(rows, learned, nodes),
        "learner": learned,
        "learner_peak_gib": learner_peaks(folder),
        "background_checkpoint_s": background_saves(folder),
    }
    if (folder / "wall.json").exists():
        w = json.loads((folder / "wall.json").read_text())
        out["run_wall_s"] = w["ended"] - w["started"]
    return out


if __name__ == "__main__":
    print(json.dumps(main(Path(sys.argv[1])), indent=2))
