"""Pieces of benchmarks/load_soak.py (and tests/e2e/test_load_soak.py): the tiny scripts the
replay sampler hands out, the deployment (one nats-server, the four services apart), memory
sampled from /proc, and the figures read back from the log."""

from __future__ import annotations

import asyncio
import os
import statistics
import threading
import time
from pathlib import Path

from tests.e2e._harness import serve_four, stop, wait_ready
from treegrpo import events
from treegrpo.bus import STREAM, Bus
from treegrpo.embedded import EmbeddedNats
from treegrpo.events import Kind

HEADER = '# /// script\n# requires-python = ">=3.10"\n#\n# [tool.resources]\n# cpu = 1\n# mem = 1\n# ///\n'
# stdlib only, a few ms each: the sandbox (workspace, limits, an interpreter's start) is the cost
WRITES = """import csv, os
rows = list(csv.DictReader(open("./input/test.csv")))
os.makedirs("./submission", exist_ok=True)
with open("./submission/submission.csv", "w", newline="") as f:
    w = csv.writer(f)
    w.writerow(["id", "EAP", "HPL", "MWS"])
    for r in rows:
        w.writerow([r["id"], {p}])
print("Validation metric: 1.09")
"""
SCRIPTS = {
    "prior.py": WRITES.format(p="0.40, 0.29, 0.31"),
    "flat.py": WRITES.format(p="0.34, 0.33, 0.33"),
    "skewed.py": WRITES.format(p="0.70, 0.15, 0.15"),
    "nosub.py": 'print("forgot the submission")\n',  # graded as a failed node: a status value
}
SERVICES = ("sampler", "executor", "grader", "learner")


def write_scripts(dir: Path) -> Path:
    dir.mkdir(parents=True, exist_ok=True)
    for name, body in SCRIPTS.items():
        (dir / name).write_text(HEADER + body)
    return dir


def deployment(home: Path, model: Path, concurrency: int) -> tuple[EmbeddedNats, list]:
    """One nats-server and the four services apart on it, ready, the sampler on the replay backend."""
    server = EmbeddedNats(home / "nats").start()
    sampler = (
        'backend="replay"',
        f'replay.source_dir="{write_scripts(home / "replay")}"',
        "sampling.max_new_tokens=256",
        "hf.torch_threads=1",
    )
    executor = (f"max_concurrency={concurrency}", "timeout_s=60")
    services = serve_four(home, server.url, model, sampler=sampler, executor=executor)
    try:  # memory is sampled from here on: the services' start-up is not in it
        wait_ready(home, services)
    except RuntimeError:
        stop(services)
        server.stop()
        raise
    return server, services


def rss_mb(pid: int) -> float:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return float("nan")


class MemorySampler(threading.Thread):
    """Each process's resident memory every `every_s`, with the nodes graded so far (`progress`)."""

    def __init__(self, pids: dict[str, int], progress, every_s: float = 2.0):
        super().__init__(daemon=True)
        self.pids, self.progress, self.every_s = pids, progress, every_s
        self.samples: list[tuple[float, int, dict[str, float]]] = []
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.wait(self.every_s):
            self.sample()
        self.sample()  # the state at the end, however short the runs were

    def sample(self) -> None:
        self.samples.append((time.monotonic(), self.progress(), {n: rss_mb(p) for n, p in self.pids.items()}))

    def summary(self) -> dict:
        """Per process: RSS over the first and the last quarter of the samples (medians), the most,
        and the growth between the two quarters per 1,000 nodes graded."""
        out = {}
        q = max(1, len(self.samples) // 4)
        first, last = self.samples[:q], self.samples[-q:]
        for name in self.pids:
            a = statistics.median(s[2][name] for s in first)
            b = statistics.median(s[2][name] for s in last)
            nodes = statistics.median(s[1] for s in last) - statistics.median(s[1] for s in first)
            out[name] = {
                "first_quarter_mb": round(a, 1),
                "last_quarter_mb": round(b, 1),
                "max_mb": round(max(s[2][name] for s in self.samples), 1),
                "growth_mb_per_1k_nodes": round((b - a) / nodes * 1000, 2) if nodes > 0 else None,
            }
        return out


async def node_times(url: str, run_id: str) -> dict:
    """The run's nodes from the log: `node.sampled` → `node.graded` seconds per node (envelope
    times), the first sampled and the last graded time, and how many times each node was sampled,
    executed and graded (`[1, 1, 1]` each when nothing was doubled or lost)."""
    bus = await Bus.connect(url, "bench/load-reader", 10)
    sampled, graded, counts = {}, {}, {}
    kinds = [Kind.NODE_SAMPLED, Kind.NODE_EXECUTED, Kind.NODE_GRADED]
    try:
        async for _, e in bus.replay(run_id, kinds):
            kind, b = events.kind_of(e), events.body_of(e)
            counts.setdefault(b.node_id, [0, 0, 0])[kinds.index(kind)] += 1
            if kind == Kind.NODE_SAMPLED:
                sampled[b.node_id] = e.envelope.time
            elif kind == Kind.NODE_GRADED:
                graded[b.node_id] = e.envelope.time
    finally:
        await bus.close(2)
    return {
        "latency_s": [graded[n] - sampled[n] for n in graded if n in sampled],
        "first_sampled": min(sampled.values(), default=float("nan")),
        "last_graded": max(graded.values(), default=float("nan")),
        "graded_at": sorted(graded.values()),
        "counts": counts,
    }


async def graded_count(bus: Bus, run_ids: list[str]) -> int:
    n = 0
    for run_id in run_ids:
        subject = events.subject_filter(Kind.NODE_GRADED, run_id)
        n += len((await bus.js.stream_info(STREAM, subjects_filter=subject)).state.subjects or {})
    return n


async def store_bytes(url: str) -> dict[str, int]:
    """Bytes in each JetStream stream (the event stream and the object stores' streams)."""
    bus = await Bus.connect(url, "bench/load-bytes", 10)
    try:
        return {s.config.name: s.state.bytes for s in await bus.js.streams_info()}
    finally:
        await bus.close(2)


def rate_by_fifth(times: list[float]) -> list[float]:
    """Nodes/s in each fifth of the nodes graded, in order: flat when nothing slows as a run grows."""
    times, out = sorted(times), []
    for i in range(5):
        chunk = times[len(times) * i // 5 : len(times) * (i + 1) // 5]
        out.append(round((len(chunk) - 1) / (chunk[-1] - chunk[0]), 2) if len(chunk) > 1 else float("nan"))
    return out


def percentile(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))] if xs else float("nan")


def loadavg() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def run_graded(url: str, run_ids: list[str], stop: threading.Event, every_s: float = 2.0):
    """A callable for MemorySampler: nodes graded so far over `run_ids`, refreshed in a thread."""
    seen = [0]

    def poll() -> None:
        async def go() -> None:
            bus = await Bus.connect(url, "bench/load-progress", 10)
            try:
                while not stop.is_set():
                    try:
                        seen[0] = await graded_count(bus, run_ids)
                    except Exception:  # a busy server: the last count stands
                        pass
                    await asyncio.sleep(every_s)
            finally:
                await bus.close(2)

        asyncio.run(go())

    threading.Thread(target=poll, daemon=True).start()
    return lambda: seen[0]
