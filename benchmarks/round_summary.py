"""What ending a round costs the sampler: a lookup per node (before issue 16) vs the fact alone (now).

Before, the sampler computed the round's summary when the round ended: one `bus.last_event`
(`node.graded`) per node of the round, then `round.completed` with the copies. Now it publishes
`round.completed` (task, round, completed_unix) and the archive derives the summary from the node
events at export. Both round ends run here on one private nats-server over the same log, so the
ratio is measured in one run; the baseline is the old procedure, reproduced below verbatim.
The export side is measured too: the in-memory derivation (`treegrpo.archive.round_summary`) of
the same round, which is what the projection moved to export.

    python benchmarks/round_summary.py [--nodes 64 1024] [--repeats 5] [--json out.json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import tempfile
import time

from treegrpo import events
from treegrpo.archive import RunFacts, SampledFacts, node_record, round_summary
from treegrpo.bus import Bus
from treegrpo.config import RunSpec
from treegrpo.embedded import EmbeddedNats
from treegrpo.v1 import events_pb2 as pb
from treegrpo_sampler import SamplerConfig
from treegrpo_sampler._state import RunState
from treegrpo_sampler.service import SamplerService


def round_events(run: str, r: int, nodes: int) -> tuple[list[pb.Event], list[pb.NodeSampled]]:
    out, sampled = [events.make_event(run, "bench", pb.RoundStarted(task="t", round=r, started_unix=1))], []
    for i in range(nodes):
        step, index = divmod(i, 16)
        nid = events.node_id(run, "t", r, step, index)
        g = pb.NodeGraded(
            node_id=nid,
            task="t",
            round=r,
            step=step,
            status="ok" if i % 3 else "crashed",
            exec_time=1.0 + i,
            sibling_group=events.group_id(run, "t", r, step),
        )
        if i % 3:
            g.oriented, g.test_metric = i * 0.01, i * 0.01
        out.append(events.make_event(run, "bench", g))
        sampled.append(
            pb.NodeSampled(node_id=nid, task="t", round=r, step=step, index_in_group=index, gen_seconds=0.5)
        )
    return out, sampled


async def old_round_end(bus: Bus, run: str, r: int, ids: list[str]) -> int:
    """The sampler's round end before: a lookup per node, then round.completed with the copies."""
    valid, exec_seconds, best = 0, 0.0, None
    for nid in ids:
        graded = await bus.last_event(run, "node.graded", nid)
        g = graded.node_graded
        exec_seconds += g.exec_time
        if g.status != "ok":
            continue
        valid += 1
        if g.HasField("oriented") and (best is None or g.oriented > best[0]):
            best = (g.oriented, nid, g.test_metric)
    body = pb.RoundCompleted(
        task="t",
        round=r,
        nodes=len(ids),
        valid=valid,
        gen_exec_seconds=exec_seconds,
        completed_unix=int(time.time()),
        rollout_file=f"round_{r}/t__1.jsonl",
    )
    if best is not None:
        body.best_test_metric, body.best_node_id = best[2], best[1]
    await bus.publish(events.make_event(run, "bench-old", body))
    return len(ids)


def scored_round(bus: Bus, run: str, nodes: int) -> tuple[SamplerService, RunState, object]:
    """The sampler's own round-end code (`SamplerService._maybe_complete_round`, no model loaded: a
    round end touches only the bus and the run's folded state), on a round whose groups are scored."""
    svc = SamplerService(SamplerConfig(publish_run_completed=False), "bench")
    svc.bus = bus
    spec = RunSpec(run_id=run, tasks=["t"], rounds=2, tree={"expansions": nodes // 16, "group_size": 16})
    state = RunState(run, spec)
    for step in range(nodes // 16):
        group = pb.GroupScored(sibling_group=events.group_id(run, "t", 1, step), task="t", round=1, step=step)
        for i in range(16):
            group.members.add(node_id=events.node_id(run, "t", 1, step, i), reward=0.0, status="ok")
        state.apply(pb.Event(group_scored=group))
    return svc, state, state.round("t", 1)


def derive(run: str, before: list[pb.Event], sampled: list[pb.NodeSampled]) -> float:
    t0 = time.perf_counter()
    facts = RunFacts(run)
    for e in [*before, events.make_event(run, "bench", pb.RoundCompleted(task="t", round=1))]:
        facts.add(e)
    rf = next(iter(facts.rounds.values()))
    recs = [node_record(facts.graded[n], None, None, False) for n in rf.node_ids]
    round_summary(facts, rf, recs, {s.node_id: SampledFacts.of(s) for s in sampled})
    return time.perf_counter() - t0


class Counting:
    """Counts the bus lookups a round end makes (wraps the one Bus method the old code used)."""

    def __init__(self, bus: Bus):
        self.calls, self._inner = 0, bus.last_event
        bus.last_event = self._count

    async def _count(self, *args, **kwargs):
        self.calls += 1
        return await self._inner(*args, **kwargs)


async def main(args) -> dict:
    rows = {}
    with tempfile.TemporaryDirectory() as tmp, EmbeddedNats(tmp) as server:
        bus = await Bus.connect(server.url, "bench")
        await bus.ensure()
        counter = Counting(bus)
        for n in args.nodes:
            old_s, new_s, derive_s, lookups = [], [], [], {}
            for rep in range(args.repeats):
                run = f"b{n}x{rep}"
                events, sampled = round_events(run, 1, n)
                await bus.publish_many(events)
                ids = [e.node_graded.node_id for e in events[1:]]
                svc, state, rs = scored_round(bus, run, n)
                # new first: the old one's round.completed is then the server-side duplicate (no slower)
                for name, end, times in (
                    ("new", svc._maybe_complete_round(state, rs), new_s),
                    ("old", old_round_end(bus, run, 1, ids), old_s),
                ):
                    before = counter.calls
                    t0 = time.perf_counter()
                    await end
                    times.append(time.perf_counter() - t0)
                    lookups[name] = counter.calls - before
                assert rs.completed, "the sampler did not complete the round"
                derive_s.append(derive(run, events, sampled))
            rows[n] = {
                "old_round_end_ms": statistics.median(old_s) * 1e3,
                "new_round_end_ms": statistics.median(new_s) * 1e3,
                "old_lookups": lookups["old"],
                "new_lookups": lookups["new"],
                "export_derive_ms": statistics.median(derive_s) * 1e3,
            }
            rows[n]["speedup"] = rows[n]["old_round_end_ms"] / rows[n]["new_round_end_ms"]
            print(
                f"{n} nodes: round end {rows[n]['old_round_end_ms']:.2f} ms ({lookups['old']} lookups) -> "
                f"{rows[n]['new_round_end_ms']:.2f} ms ({lookups['new']}); x{rows[n]['speedup']:.0f}; "
                f"export derivation {rows[n]['export_derive_ms']:.2f} ms"
            )
        await bus.close()
    result = {
        "date": time.strftime("%Y-%m-%d"),
        "repeats": args.repeats,
        "machine": f"{platform.machine()} {os.cpu_count()} cores",
        "by_nodes": rows,
    }
    print(json.dumps(result, indent=2))
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(result, fh, indent=2)
    return result


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, nargs="+", default=[64, 1024])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--json", default="")
    asyncio.run(main(ap.parse_args()))
