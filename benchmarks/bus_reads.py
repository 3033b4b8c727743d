"""Bus reads per piece of work, counted at the NATS client (so any two commits compare alike):
the learner's read of one trained group (G=16), its restore when it opens a fresh run, the
grader completing every group of an imported run (ids not the contract's) of N nodes, and a run's
end (export and report of an imported small archive).

    .venv/bin/python benchmarks/bus_reads.py [--nodes 2000] [--repeats 20] [--json OUT]

Counts: direct gets of one subject (lookups), batched direct gets of many (batches), read
consumers opened, pull fetches, messages the fetches brought, stream-info requests. Run it once
per commit (PYTHONPATH at that checkout) for the before/after rows of docs/PERFORMANCE.md ("Bus
reads"); the learner's timings are medians of `--repeats` runs (the others': one run), on
loopback to a local nats-server.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

from nats.aio.client import Client
from nats.js.client import JetStreamContext

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.learner_events import scored_group  # noqa: E402
from treegrpo import events  # noqa: E402
from treegrpo.bus import Bus  # noqa: E402
from treegrpo.embedded import EmbeddedNats  # noqa: E402
from treegrpo.events import Kind  # noqa: E402
from treegrpo.v1 import events_pb2 as pb  # noqa: E402

COUNTS = {"lookups": 0, "batches": 0, "consumers": 0, "fetches": 0, "messages": 0, "infos": 0}
BATCHED_GET = "$JS.API.DIRECT.GET.TREEGRPO"  # a batched direct get goes to the stream's bare subject


def count_client_reads() -> None:
    """Wrap the JetStream client's read calls once, process-wide."""
    get_last, pull, info = (
        JetStreamContext.get_last_msg,
        JetStreamContext.pull_subscribe,
        JetStreamContext.stream_info,
    )
    fetch, publish = JetStreamContext.PullSubscription.fetch, Client.publish

    async def get_last_msg(self, *a, **k):
        COUNTS["lookups"] += 1
        return await get_last(self, *a, **k)

    async def pull_subscribe(self, *a, **k):
        COUNTS["consumers"] += 1
        return await pull(self, *a, **k)

    async def fetch_counted(self, *a, **k):
        COUNTS["fetches"] += 1
        msgs = await fetch(self, *a, **k)
        COUNTS["messages"] += len(msgs)
        return msgs

    async def stream_info(self, *a, **k):
        COUNTS["infos"] += 1
        return await info(self, *a, **k)

    async def publish_counted(self, subject, *a, **k):
        COUNTS["batches"] += subject == BATCHED_GET
        return await publish(self, subject, *a, **k)

    Client.publish = publish_counted
    JetStreamContext.get_last_msg, JetStreamContext.pull_subscribe = get_last_msg, pull_subscribe
    JetStreamContext.stream_info, JetStreamContext.PullSubscription.fetch = stream_info, fetch_counted


async def measured(work, repeats: int = 1) -> tuple[dict, float]:
    """The counts of one run of `work` and its median wall time over `repeats` runs."""
    times = []
    for _ in range(repeats):
        for k in COUNTS:
            COUNTS[k] = 0
        t0 = time.perf_counter()
        await work()
        times.append(time.perf_counter() - t0)
    return dict(COUNTS), statistics.median(times)


async def group_read(bus: Bus, repeats: int) -> tuple[dict, float]:
    from treegrpo_learner._run_learner import RunLearner

    group = await scored_group(bus, "lg", "t", 1, 0, [0.1 * i for i in range(16)], vocab=320)
    gs = (await bus.last_event("lg", Kind.GROUP_SCORED, group)).group_scored
    run = SimpleNamespace(bus=bus, run_id="lg")  # what `members` reads of its run, at both commits
    return await measured(lambda: RunLearner.members(run, gs), repeats)


async def fresh_open(bus: Bus, tmp: Path, repeats: int) -> tuple[dict, float]:
    from treegrpo_learner import _checkpoint as ckpt
    from treegrpo_learner import _restore

    async def before() -> None:  # the free functions over a RunLearner
        run = SimpleNamespace(bus=bus, run_id="fo", ckpt_dir=tmp, state=ckpt.LearnerState(run_id="fo"))
        assert await _restore.restore(run) is None
        await _restore.finish_tail(run)

    async def after() -> None:
        restorer = _restore.Restorer(bus, "fo", "learner", None, tmp)
        restored = await restorer.restore()
        assert restored.fact is None
        await restorer.finish_tail(restored.state, restored, None, None)

    return await measured(after if hasattr(_restore, "Restorer") else before, repeats)


async def imported_groups(bus: Bus, nodes: int) -> tuple[dict, float]:
    from treegrpo_grader import Shaping
    from treegrpo_grader._groups import GroupTracker

    size, groups = 16, nodes // 16
    facts = [
        pb.NodeGraded(
            node_id=f"imported-{g:04d}-{i:02d}",
            sibling_group=f"group{g:04d}",
            task="t",
            round=1,
            step=g,
            group_size=size,
            status="ok",
            oriented=float(i),
        )
        for i in range(size)
        for g in range(groups)
    ]
    await bus.publish_many([events.make_event("imp", "archive-import", f) for f in facts])
    tracker = GroupTracker(bus, Shaping())
    scored = []

    async def work() -> None:
        for f in facts:
            fact = await tracker.on_graded("imp", f)
            if fact is not None:
                tracker.mark_scored("imp", fact.sibling_group)
                scored.append(fact.sibling_group)

    out = await measured(work)
    assert len(scored) == groups
    return out


async def run_end(bus: Bus, tmp: Path) -> tuple[dict, float]:
    """What the runner does at a run's end: export the run and report it (an imported small archive)."""
    from tests.archive_gen import generate
    from treegrpo import report
    from treegrpo.archive import collect_facts, export_runs, import_root

    generate(tmp / "seed", "small")
    run_id = (await import_root(bus, tmp / "seed"))[0].run_id

    async def before() -> None:  # each reads the run itself
        await export_runs(bus, [run_id], tmp / "export-before")
        await report.build_report(bus, [run_id], tmp / "report-before")

    async def after() -> None:  # the report reads in the export's passes
        facts = await collect_facts(bus, run_id)
        reading = report.BusReading(facts)
        also = lambda _run, body: reading.accept(body)  # noqa: E731
        await export_runs(bus, [run_id], tmp / "export-after", facts={run_id: facts}, on_sampled=also)
        report.write_report([reading.finish()], tmp / "report-after")

    return await measured(after if hasattr(report, "BusReading") else before)


async def main(nodes: int, repeats: int) -> dict:
    count_client_reads()
    with tempfile.TemporaryDirectory() as tmp, EmbeddedNats(Path(tmp) / "nats") as server:
        bus = await Bus.connect(server.url, "bench/reads")
        await bus.ensure()
        try:
            rows = {
                "learner group read (G=16)": await group_read(bus, repeats),
                "learner open of a fresh run": await fresh_open(bus, Path(tmp) / "ckpt", repeats),
                f"grader, imported run of {nodes} nodes": await imported_groups(bus, nodes),
                "a run's end: export and report": await run_end(bus, Path(tmp)),
            }
        finally:
            await bus.close(2)
    for name, (counts, seconds) in rows.items():
        print(f"{name:<40} {seconds * 1000:10.2f} ms  {counts}")
    return {name: {"seconds": s, **c} for name, (c, s) in rows.items()}


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--nodes", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    result = asyncio.run(main(args.nodes, args.repeats))
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n")
