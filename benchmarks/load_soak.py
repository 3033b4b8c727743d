"""Load and soak through one deployment (issue 32, item 2).

    python benchmarks/load_soak.py load --runs 8 --nodes 200 [--json out.json]
    python benchmarks/load_soak.py soak --nodes 1000 [--train] [--json out.json]
    python benchmarks/load_soak.py growth --sizes 1000,5000,20000 [--json out.json]

`load` and `soak`: one nats-server and the four services started apart (`treegrpo serve`, as
compose runs them: tests/e2e/_harness.py's `serve_four`), the sampler on the replay backend (the
tiny model teacher-forces a fixed completion: the policy costs next to nothing) handing out real
but tiny scripts (benchmarks/_load_parts.py: stdlib only, a submission in a few ms, so the sandbox
is what costs), then `--runs` concurrent `treegrpo run --attach` of `--nodes` nodes each (one
task, E10 × G10 a round, `nodes / 100` rounds; training off unless `--train`: a deployed sampler
serves one training run's adapters at a time, docs/DEPLOY.md "Several runs"; the runner's own
export and report off, timed apart below). Measured: nodes/s through all four services (first
`node.sampled` → last `node.graded` of all runs, from the log's envelope times), p50/p99 of a
node's `node.sampled` → `node.graded`, each service's resident memory over the runs (first and
last quarter, most, growth per 1,000 nodes), stream bytes per node, and the export and report of
one run timed in this process on the same server. Checked: every node sampled, executed and
graded exactly once.

`growth`: export and report time against a run's size, on runs written by tests/archive_gen.py
(E10 × G10 a round, `size / 100` rounds) imported into a private nats-server.
Every result carries the machine's load average (before, after).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._load_parts import (  # noqa: E402
    SERVICES,
    MemorySampler,
    deployment,
    loadavg,
    node_times,
    percentile,
    rate_by_fifth,
    run_graded,
    store_bytes,
)
from tests.e2e._harness import ROOT, env_for, prepare_home, run_argv, stop  # noqa: E402
from treegrpo.bus import STREAM, Bus  # noqa: E402

E, G = 10, 10


def run_timeout_s(runs: int, nodes: int) -> int:
    """A run's time limit: 1 s a node of all runs (~5 nodes/s is what 2 cores do), at least 50 min;
    a fixed 3,000 s cut the first 20,000-node soak at 17,540 nodes."""
    return max(3000, runs * nodes)


def start_runs(home: Path, url: str, runs: int, nodes: int, train: bool, tag: str, shape) -> dict:
    """`runs` × `treegrpo run --attach` of `nodes` nodes each (E × G a round), at once."""
    (e, g), ids = shape, {f"{tag}_{i}": None for i in range(runs)}
    for run_id in ids:
        sets = (
            f'runner.nats_url="{url}"', f"runner.timeout_s={run_timeout_s(runs, nodes)}",
            "runner.export=false", "runner.report=false", f'run.run_id="{run_id}"',
            f"run.rounds={max(1, nodes // (e * g))}",
            f"run.tree.expansions={e}", f"run.tree.group_size={g}", f"run.train={str(train).lower()}",
        )  # fmt: skip
        with open(home / f"{run_id}.log", "wb") as out:
            argv = run_argv("treegrpo/examples/run-small.toml", "--attach", sets=sets)
            ids[run_id] = subprocess.Popen(
                argv, env=env_for(home), cwd=ROOT, stdout=out, stderr=subprocess.STDOUT
            )
    return ids


async def export_and_report(url: str, run_id: str, out: Path, report: bool = True) -> dict:
    """The runner's end of a run (treegrpo/runner/_execute.py), timed: export, then the report."""
    from treegrpo.archive import export_runs
    from treegrpo.report import build_report

    bus = await Bus.connect(url, "bench/load-export", 10)
    try:
        t = time.monotonic()
        (res,) = await export_runs(bus, [run_id], out / "export")
        export_s = time.monotonic() - t
        t = time.monotonic()
        if report:
            await build_report(bus, [run_id], out / "report")
        return {
            "nodes": res.nodes,
            "export_s": round(export_s, 2),
            "report_s": round(time.monotonic() - t, 2) if report else None,
        }
    finally:
        await bus.close(2)


def deployed(
    root: Path,
    runs: int,
    nodes: int,
    train: bool,
    concurrency: int,
    shape=(E, G),
    report: bool = True,
    memory_every_s: float = 2.0,
) -> dict:
    """The `load` and `soak` measurement in `root` (tests/e2e/test_load_soak.py runs a short one,
    without the report's fixed ~5 s, sampling memory often enough for runs of a few seconds)."""
    home = root / "home"
    model = prepare_home(home)
    server, services = deployment(home, model, concurrency)
    load0, codes = loadavg(), []
    try:
        t0 = time.monotonic()
        procs = start_runs(home, server.url, runs, nodes, train, "load", shape)
        stop_poll = threading.Event()
        pids = {n: p.pid for n, p in zip(SERVICES, services, strict=True)} | {"nats-server": server.proc.pid}
        mem = MemorySampler(pids, run_graded(server.url, list(procs), stop_poll), memory_every_s)
        mem.start()
        exits = {r: p.wait(run_timeout_s(runs, nodes) + 600) for r, p in procs.items()}
        wall = time.monotonic() - t0
        mem.done.set()
        mem.join(10)
        stop_poll.set()
        alive = [p.poll() is None for p in services]
        per_run = {r: asyncio.run(node_times(server.url, r)) for r in procs}
        size = asyncio.run(store_bytes(server.url))
        first = next(iter(procs))
        end = asyncio.run(export_and_report(server.url, first, root / "out", report))
    finally:
        codes = stop(services)
        server.stop()
    lat = [x for t in per_run.values() for x in t["latency_s"]]
    counts = [c for t in per_run.values() for c in t["counts"].values()]
    span = max(t["last_graded"] for t in per_run.values()) - min(t["first_sampled"] for t in per_run.values())
    graded = sum(1 for c in counts if c[2])
    return {
        "runs": runs, "nodes_per_run": nodes, "train": train, "executor_slots": concurrency,
        "runner_exits": sorted(set(exits.values())), "services_alive": alive, "service_exit_codes": codes,
        "nodes_graded": graded, "every_node_once": all(c == [1, 1, 1] for c in counts),
        "nodes_per_s": round(graded / span, 2), "wall_s": round(wall, 1),
        "nodes_per_s_by_fifth": rate_by_fifth([x for t in per_run.values() for x in t["graded_at"]]),
        "sampled_to_graded_p50_s": round(percentile(lat, 50), 2),
        "sampled_to_graded_p99_s": round(percentile(lat, 99), 2),
        "memory": mem.summary(), "memory_samples": len(mem.samples),
        "stream_bytes_per_node": round(size[STREAM] / max(graded, 1)),
        "object_store_bytes": {k: v for k, v in size.items() if k != STREAM},
        "export_report_one_run": end, "loadavg_before": load0, "loadavg_after": loadavg(),
    }  # fmt: skip


async def growth_one(url: str, root: Path, size: int) -> dict:
    from tests.archive_gen import RunPlan, Size, write_run
    from treegrpo.archive import import_root

    run_id = f"grow_{size}"
    write_run(
        root / "in", RunPlan(run_id, "spooky-mini", False, max(1, size // (E * G))), Size(G, E, 40, 200), 0
    )
    bus = await Bus.connect(url, "bench/growth", 30)
    try:
        await bus.ensure()
        t = time.monotonic()
        await import_root(bus, root / "in" / run_id)
        import_s = time.monotonic() - t
    finally:
        await bus.close(2)
    return {"import_s": round(import_s, 2), **await export_and_report(url, run_id, root / f"out_{size}")}


def growth(root: Path, sizes: list[int]) -> dict:
    from treegrpo.embedded import EmbeddedNats

    server = EmbeddedNats(root / "nats").start()
    out = {}
    try:
        for size in sizes:
            load0 = loadavg()
            out[str(size)] = {
                **asyncio.run(growth_one(server.url, root, size)),
                "loadavg": [load0, loadavg()],
            }
            print(size, out[str(size)], flush=True)
    finally:
        server.stop()
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("what", choices=("load", "soak", "growth"))
    ap.add_argument("--runs", type=int, default=8)
    ap.add_argument("--nodes", type=int, default=200, help="per run (soak: the one run's)")
    ap.add_argument("--train", action="store_true")
    ap.add_argument("--slots", type=int, default=2, help="the executor's max_concurrency")
    ap.add_argument("--sizes", default="1000,5000,20000")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix=f"tg-{args.what}-"))
    head = {"what": args.what, "date": time.strftime("%Y-%m-%d"), "machine": f"{os.cpu_count()} cores"}
    if args.what == "growth":
        result = {**head, "sizes": growth(root, [int(s) for s in args.sizes.split(",")])}
    else:
        runs = 1 if args.what == "soak" else args.runs
        result = {**head, **deployed(root, runs, args.nodes, args.train, args.slots)}
    text = json.dumps(result, indent=1)
    print(text)
    if args.json:
        args.json.write_text(text + "\n")
    ok = args.what == "growth" or (result["every_node_once"] and result["runner_exits"] == [0])
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
