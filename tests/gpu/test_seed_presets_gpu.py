"""The seed's two presets through the whole loop on one GPU (run on the device machine:
`benchmarks/seed_round_gpu.sh`, which stages vLLM + fla and runs this file).

`treegrpo run treegrpo/examples/seed-<shape>-h200.toml` (and `seed-qwen35-9b-h100.toml`, the 9B on an
80 GB card) on a random-weight checkpoint of the real
shape (`treegrpo model init --shape`): vLLM and the learner share the GPU (the engine sleeps while
the learner steps), 1 task x E4 x G16 = 64 nodes a round, TG_SEED_ROUNDS rounds (default 2).
Asserted from the run's seed-format export: every node of every round sampled, executed and
graded; a learner step per round, the last one's included, with the seed's phases in timing.jsonl
and the sleep/wake phases of a colocated step; round 2 served by the v1 adapter, loaded and
confirmed by the sampler. TG_SEED_SET adds `--set` overrides (a card other than the preset's).
With TG_GPU_OUT set, the export's timing, the run's and the learner's logs and `nvidia-smi dmon` go
there for docs/PERFORMANCE.md (benchmarks/seed_round_summary.py).

Imports a private module: `treegrpo.models._seed_shapes` (what these tests exercise is not on the
package's public surface).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytestmark = [
    pytest.mark.gpu,
    pytest.mark.timeout(3000),
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
]
ROOT = Path(__file__).resolve().parents[2]
SEED_PHASES = ("update_weights", "gen", "old_log_prob", "ref", "adv", "update_actor")


def _model(home: Path, shape: str) -> Path:
    from treegrpo.models._seed_shapes import build_seed_model

    folder = home / "models" / shape
    if not (folder / "config.json").exists():
        for other in (home / "models").glob("qwen3*"):  # the device's disk holds one shape at a time
            shutil.rmtree(other, ignore_errors=True)
        build_seed_model(folder, shape, device="cuda")
    return folder


def _run(preset: str, model: Path, home: Path, out: Path, rounds: int) -> Path:
    env = dict(os.environ, TREEGRPO_HOME=str(home), VLLM_WORKER_MULTIPROC_METHOD="spawn")
    cmd = [sys.executable, "-m", "treegrpo.cli", "run", str(ROOT / "treegrpo" / "examples" / preset)]
    cmd += ["--set", f'sampler.model="{model}"', "--set", f'learner.model="{model}"']
    cmd += ["--set", f"run.rounds={rounds}"]
    # TG_SEED_SET="section.key=value ...": the preset on another card, with the changes in the command
    # (the 9B on an 80 GB H100: learner.packing.gradient_checkpointing=true, learner.colocate.*)
    for override in os.environ.get("TG_SEED_SET", "").split():
        cmd += ["--set", override]
    dmon = subprocess.Popen(
        ["nvidia-smi", "dmon", "-s", "um", "-d", "1", "-o", "DT"], stdout=(out / "dmon.log").open("w")
    )
    started = time.time()
    try:
        with (out / "run.log").open("w") as log:
            proc = subprocess.run(cmd, env=env, stdout=log, stderr=subprocess.STDOUT, timeout=2700)
    finally:
        dmon.terminate()
    (out / "wall.json").write_text(json.dumps({"started": started, "ended": time.time()}))
    assert proc.returncode == 0, (out / "run.log").read_text()[-4000:]
    runs = sorted((home / "runs").glob("*/"), key=lambda p: p.stat().st_mtime)
    return runs[-1]


def _records(run_dir: Path) -> list[dict]:
    rows = []
    for path in run_dir.rglob("round_*/*.jsonl"):
        rows += [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return rows


@pytest.mark.parametrize(
    "shape,preset",
    [
        ("qwen35-9b", "seed-qwen35-9b-h200.toml"),
        ("qwen36-27b", "seed-qwen36-27b-h200.toml"),
        ("qwen35-9b", "seed-qwen35-9b-h100.toml"),  # an 80 GB card: the learner's step checkpointed
    ],
)
def test_seed_preset_closes_the_loop_on_one_gpu(shape, preset, tmp_path):
    if os.environ.get("TG_SEED_SHAPES") and shape not in os.environ["TG_SEED_SHAPES"].split(","):
        pytest.skip(f"TG_SEED_SHAPES={os.environ['TG_SEED_SHAPES']}")
    home = Path(os.environ.get("TG_GPU_HOME", tmp_path / "home"))
    # one folder per preset, named as seed_round_gpu.sh's name_of: qwen35-9b (its H200 preset), qwen35-9b-h100
    name = preset.removeprefix("seed-").removesuffix(".toml").removesuffix("-h200")
    out = Path(os.environ.get("TG_GPU_OUT", tmp_path / "out")) / name
    out.mkdir(parents=True, exist_ok=True)
    model = _model(home, shape)
    rounds = int(os.environ.get("TG_SEED_ROUNDS", "2"))
    run_dir = _run(preset, model, home, out, rounds=rounds)
    (out / "run_dir.txt").write_text(str(run_dir))  # the export goes back for the speed table
    for log in run_dir.glob("logs/learner*"):  # its per-step throughput lines (seed_round_summary.py)
        shutil.copy(log, out / log.name)
    timing_files = list(run_dir.rglob("timing.jsonl"))
    assert timing_files, f"no timing.jsonl under {run_dir}"
    steps = [json.loads(line) for line in timing_files[0].read_text().splitlines() if line.strip()]
    shutil.copy(timing_files[0], out / "timing.jsonl")
    rows = _records(run_dir)
    (out / "nodes.json").write_text(
        json.dumps([{k: r.get(k) for k in ("round", "status", "reward", "exec_time")} for r in rows])
    )
    for n in range(1, rounds + 1):
        assert len([r for r in rows if r["round"] == n]) == 64, n
    # synchronous: one step per round, the last round's included (the runner waits for it)
    assert len(steps) == rounds, steps
    for step in steps:
        assert all(p in step["phases_s"] for p in SEED_PHASES), step
    # colocated: the learner waited for the engine to sleep before its first step, and the engine
    # woke for the version it then served
    assert "sleep" in steps[0]["phases_s"], steps[0]
    assert "wake" in steps[0]["phases_s"], steps[0]
