"""Overhead of the executor's local sandbox for a trivial script, against a bare interpreter start.

Measured in the same run, several times:
  baseline  `python -c pass` started with asyncio (what any executor must pay at least)
  sandbox   LocalBackend.run of a script that is `pass`: workspace, jail (namespaces, mounts,
            uid drop, rlimits), launch, wait, classify, cleanup
  overhead  sandbox - baseline (medians; p95 of the sandbox too)
  throughput  32 trivial nodes at once (max_concurrency 32), nodes/s, against 32 bare starts at once
  --base DIR  the same measurement of another checkout (e.g. the previous release:
              `git worktree add /tmp/base 5e8922e`), one repeat of it after each of ours

    python benchmarks/executor_overhead.py --samples 40 --repeats 3 --base /tmp/base13 \
        --plot docs/img/executor_overhead.png
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SRC = os.environ.get("TG_BENCH_SRC") or str(
    Path(__file__).resolve().parents[1]
)  # --base runs us with its tree
sys.path.insert(0, SRC)

from rich.progress import Progress  # noqa: E402

from treegrpo_executor import ExecutorConfig, Job, Limits, LocalBackend, parse_declaration  # noqa: E402


async def bare_start() -> float:
    t0 = time.perf_counter()
    proc = await asyncio.create_subprocess_exec(sys.executable, "-c", "pass")
    await proc.wait()
    return time.perf_counter() - t0


async def sandbox_run(backend: LocalBackend, i: int) -> float:
    code = "pass\n"
    job = Job(
        "bench",
        f"{i:012x}",
        "none",
        code,
        Limits.for_node(parse_declaration(code, backend.cfg.gate), backend.cfg),
    )
    t0 = time.perf_counter()
    out = await backend.run(job)
    elapsed = time.perf_counter() - t0
    assert out.status == "no_submission", (out.status, out.term_tail)
    return elapsed


def p95(xs: list[float]) -> float:
    return sorted(xs)[max(0, int(round(0.95 * len(xs))) - 1)]


async def one_repeat(
    root: Path, samples: int, concurrent: int, progress, task, disk: str | None = None
) -> dict:
    local = {"workspace_root": str(root / "ws"), "hidden_paths": [], **({"disk": disk} if disk else {})}
    cfg = ExecutorConfig(max_concurrency=concurrent, public_data_roots=[], timeout_s=60, local=local)
    backend = LocalBackend(cfg)
    await backend.start()
    base, sand = [], []
    for i in range(samples):  # interleaved, so load on the shared machine hits both alike
        base.append(await bare_start())
        sand.append(await sandbox_run(backend, i))
        progress.advance(task)
    t0 = time.perf_counter()
    await asyncio.gather(*(bare_start() for _ in range(concurrent)))
    base_tp = concurrent / (time.perf_counter() - t0)
    t0 = time.perf_counter()
    await asyncio.gather(*(sandbox_run(backend, 10_000 + i) for i in range(concurrent)))
    sand_tp = concurrent / (time.perf_counter() - t0)
    progress.advance(task)
    await backend.close()
    return {
        "jailed": backend.jailed,
        "baseline": base,
        "sandbox": sand,
        "baseline_median": statistics.median(base),
        "sandbox_median": statistics.median(sand),
        "sandbox_p95": p95(sand),
        "overhead_median": statistics.median(sand) - statistics.median(base),
        "throughput_nodes_s": sand_tp,
        "baseline_throughput_s": base_tp,
    }


def summarize(reps: list[dict]) -> dict:
    med = statistics.median
    out = {
        "baseline_median_ms": 1000 * med(r["baseline_median"] for r in reps),
        "sandbox_median_ms": 1000 * med(r["sandbox_median"] for r in reps),
        "sandbox_p95_ms": 1000 * med(r["sandbox_p95"] for r in reps),
        "overhead_median_ms": 1000 * med(r["overhead_median"] for r in reps),
        "throughput_nodes_s": med(r["throughput_nodes_s"] for r in reps),
        "baseline_throughput_s": med(r["baseline_throughput_s"] for r in reps),
    }
    out["ratio_median"] = out["sandbox_median_ms"] / out["baseline_median_ms"]
    out["throughput_ratio"] = out["throughput_nodes_s"] / out["baseline_throughput_s"]
    return out


def base_repeat(base: Path, samples: int, concurrent: int, tmp: Path) -> dict:
    """One repeat of the other checkout's executor, in a process of its own (its modules, not ours)."""
    out = tmp / "base.json"
    subprocess.run(
        [
            sys.executable,
            __file__,
            "--samples",
            str(samples),
            "--repeats",
            "1",
            "--concurrent",
            str(concurrent),
            "--json",
            str(out),
            "--quiet",
        ],
        check=True,
        cwd=base,
        env={**os.environ, "TG_BENCH_SRC": str(base), "PYTHONPATH": str(base)},
    )
    return json.loads(out.read_text())["repeats"][0]


def plot(reps: list[dict], path: Path, base_reps: list[dict]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 3.5))
    series = [
        ("python -c pass", [x for r in reps for x in r["baseline"]]),
        ("sandboxed node", [x for r in reps for x in r["sandbox"]]),
    ]
    if base_reps:
        series.append(("previous release", [x for r in base_reps for x in r["sandbox"]]))
    for label, xs in series:
        ms = [x * 1000 for x in xs]
        ax.hist(ms, bins=40, alpha=0.5, label=f"{label} (median {statistics.median(ms):.0f} ms)")
    ax.set_xlabel("wall time per start (ms)")
    ax.set_ylabel("count")
    ax.set_title("Executor local sandbox: trivial script vs bare interpreter")
    ax.legend()
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--samples", type=int, default=40)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--concurrent", type=int, default=32)
    ap.add_argument("--base", type=Path, default=None, help="another checkout to measure in the same run")
    ap.add_argument(
        "--disk", choices=["auto", "loop", "tmpfs"], default=None, help="local.disk of our executor"
    )
    ap.add_argument("--quiet", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--plot", type=Path, default=None)
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()
    reps, base_reps = [], []
    with tempfile.TemporaryDirectory(prefix="tg-bench-") as tmp, Progress(disable=args.quiet) as progress:
        task = progress.add_task("executor overhead", total=args.repeats * (args.samples + 1))
        for _ in range(args.repeats):
            reps.append(await one_repeat(Path(tmp), args.samples, args.concurrent, progress, task, args.disk))
            if args.base:
                base_reps.append(base_repeat(args.base, args.samples, args.concurrent, Path(tmp)))
    summary = {
        "date": time.strftime("%Y-%m-%d"),
        "cpus": os.cpu_count(),
        "jailed": reps[0]["jailed"],
        "samples": args.samples,
        "repeats": args.repeats,
        "disk": args.disk or "default",
        **summarize(reps),
    }
    if base_reps:
        summary["base"] = summarize(base_reps)
        summary["overhead_vs_base_ms"] = summary["sandbox_median_ms"] - summary["base"]["sandbox_median_ms"]
    if not args.quiet:
        print(json.dumps(summary, indent=1, default=lambda v: round(v, 3)))
    if args.json:
        args.json.write_text(json.dumps({"summary": summary, "repeats": reps}, indent=1))
    if args.plot:
        plot(reps, args.plot, base_reps)


if __name__ == "__main__":
    asyncio.run(main())
