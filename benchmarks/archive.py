"""Archive throughput: import and export of a seed-sized generated archive through a real nats-server.

    .venv/bin/python benchmarks/archive.py [--size seed|small] [--repeats 3] [--dir DIR]

Generates the archive with tests/archive_gen.py (the seed's 8 runs, both schemas, 2,848 nodes with
per-token logprobs), starts a private nats-server, then per repeat: imports the root into a fresh
stream (node-record MB read per second, nodes/s), exports it back (MB written per second, nodes/s,
end to end: replay from JetStream + join + JSON + files), and as the baseline serialises the same
records with a plain `json.dumps` per line into memory (no bus, no files; CPU time). Prints
medians of wall-clock MB/s and of MB per CPU-second of this process (the nats-server's own CPU is
not in the latter; on a shared, loaded machine the CPU figure is the stable one).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from tests.archive_gen import generate  # noqa: E402
from treegrpo.archive import export_runs, import_root  # noqa: E402
from treegrpo.bus import Bus  # noqa: E402
from treegrpo.embedded import EmbeddedNats  # noqa: E402


def baseline_json(root: Path) -> tuple[float, int]:
    """Plain json.loads + json.dumps of every node line (what a naive exporter does), seconds and
    bytes out."""
    lines = [
        line
        for f in sorted(root.rglob("*.jsonl"))
        if f.name != "timing.jsonl"
        for line in f.read_bytes().splitlines()
        if line.strip()
    ]
    records = [json.loads(line) for line in lines]
    t = time.process_time()
    size = sum(len(json.dumps(r)) + 1 for r in records)
    return time.process_time() - t, size


async def one_repeat(src: Path, work: Path, i: int) -> dict[str, float]:
    server = EmbeddedNats(work / f"nats{i}").start()
    try:
        bus = await Bus.connect(server.url, "bench/archive")
        await bus.ensure()
        t, c = time.perf_counter(), time.process_time()
        imported = await import_root(bus, src)
        t_imp, c_imp = time.perf_counter() - t, time.process_time() - c
        out = work / f"out{i}"
        t, c = time.perf_counter(), time.process_time()
        exported = await export_runs(bus, [r.run_id for r in imported], out)
        t_exp, c_exp = time.perf_counter() - t, time.process_time() - c
        await bus.close()
    finally:
        server.stop()
        shutil.rmtree(work / f"nats{i}", ignore_errors=True)
    nodes = sum(r.nodes for r in imported)
    read = sum(r.bytes for r in imported)
    written = sum(r.bytes for r in exported)
    shutil.rmtree(out, ignore_errors=True)
    return {
        "nodes": nodes,
        "import_s": t_imp,
        "import_mb_s": read / 1e6 / t_imp,
        "import_nodes_s": nodes / t_imp,
        "export_s": t_exp,
        "export_mb_s": written / 1e6 / t_exp,
        "export_nodes_s": nodes / t_exp,
        "export_mb": written / 1e6,
        "import_cpu_mb_s": read / 1e6 / c_imp,
        "export_cpu_mb_s": written / 1e6 / c_exp,
    }


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", choices=["seed", "small"], default="seed")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--dir", type=Path, default=None, help="work directory (default: a temp dir, removed)")
    a = ap.parse_args()
    console = Console()
    work = Path(a.dir or tempfile.mkdtemp(prefix="tg-archive-bench-"))
    src = work / "seed"
    if not src.exists():
        with console.status("generating the archive"):
            _, nodes, size = generate(src, a.size)
        console.print(f"generated {nodes} nodes, {size / 1e6:.0f} MB of node records")
    runs = []
    for i in range(a.repeats):
        r = await one_repeat(src, work, i)
        b_s, b_bytes = baseline_json(src)
        r["baseline_mb_s"] = b_bytes / 1e6 / b_s
        console.print(
            f"repeat {i + 1}: import {r['import_mb_s']:.1f} MB/s ({r['import_cpu_mb_s']:.1f}/CPU-s), "
            f"export {r['export_mb_s']:.1f} MB/s ({r['export_cpu_mb_s']:.1f}/CPU-s), "
            f"baseline json.dumps {r['baseline_mb_s']:.1f} MB/CPU-s"
        )
        runs.append(r)
    med = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
    t = Table(
        title=(
            f"archive throughput, median of {a.repeats} "
            f"({int(med['nodes'])} nodes, {med['export_mb']:.0f} MB)"
        )
    )
    for c in ("", "MB/s (wall)", "MB per CPU-s (this process)", "nodes/s", "seconds"):
        t.add_column(c, justify="right")
    t.add_row(
        "import (files → JetStream)",
        f"{med['import_mb_s']:.1f}",
        f"{med['import_cpu_mb_s']:.1f}",
        f"{med['import_nodes_s']:.0f}",
        f"{med['import_s']:.1f}",
    )
    t.add_row(
        "export (JetStream → files)",
        f"{med['export_mb_s']:.1f}",
        f"{med['export_cpu_mb_s']:.1f}",
        f"{med['export_nodes_s']:.0f}",
        f"{med['export_s']:.1f}",
    )
    t.add_row("baseline: json.dumps only", "", f"{med['baseline_mb_s']:.1f}", "", "")
    console.print(t)
    console.print(
        f"export / baseline (per CPU-s) = {med['export_cpu_mb_s'] / med['baseline_mb_s']:.2f}×, "
        f"(wall) = {med['export_mb_s'] / med['baseline_mb_s']:.2f}×"
    )
    if a.dir is None:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    asyncio.run(main())
