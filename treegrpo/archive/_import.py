"""Import a seed-format data root into the log, so old runs are analysed by the same code as new ones.

Re-importing adds nothing: every event has its deterministic id (deduplicated by the server within
its window), and before publishing we list the subjects the run already has on the stream and
skip those, so a re-import after the duplicate window is a no-op too.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from treegrpo import events
from treegrpo.archive._read import Problem, SeedRound, SeedRun, find_runs, read_nodes, read_run
from treegrpo.archive._schema import GateNodeRecord, NodeRecord
from treegrpo.archive._to_events import PRODUCER, group_events, node_events, run_started, step_event
from treegrpo.v1 import events_pb2 as pb

log = logging.getLogger(__name__)

BATCH_EVENTS = 512
BATCH_BYTES = 32 << 20


@dataclass
class ImportResult:
    run_id: str
    nodes: int = 0
    events: int = 0  # published now
    existing: int = 0  # already on the stream, skipped
    bytes: int = 0  # node-record bytes read
    problems: list[Problem] = field(default_factory=list)


class _Publisher:
    """Batches events (by count and bytes) into `bus.publish_many`, skipping subjects already stored."""

    def __init__(self, bus, existing: set[str], result: ImportResult):
        self.bus, self.existing, self.result = bus, existing, result
        self.batch: list[pb.Event] = []
        self.size = 0

    async def add(self, batch: list[pb.Event]) -> None:
        for e in batch:
            if events.subject_of(e) in self.existing:
                self.result.existing += 1
                continue
            self.batch.append(e)
            self.size += e.ByteSize()
        if len(self.batch) >= BATCH_EVENTS or self.size >= BATCH_BYTES:
            await self.flush()

    async def flush(self) -> None:
        if self.batch:
            await self.bus.publish_many(self.batch)
            self.result.events += len(self.batch)
        self.batch, self.size = [], 0


async def existing_subjects(bus, run_id: str) -> set[str]:
    return set(await bus.subjects(run_id))


def _valid_records(
    records: list[NodeRecord], node_file: Path, problems: list[Problem]
) -> Iterator[NodeRecord]:
    for r in records:
        try:
            events.check_token(r.id, "node id")
            events.check_token(r.sibling_group, "sibling_group")
        except ValueError as exc:
            problems.append(Problem(node_file, 0, f"node {r.id!r} skipped: {exc}"))
            continue
        yield r


@dataclass
class _RunShape:
    """What the run's files say about the run as a whole, gathered while its rounds are imported."""

    t0: float
    model: str
    expansions: int
    group_size: int = 0
    gate: bool = False
    last_round: int = 0


async def _import_round(run: SeedRun, rnd: SeedRound, shape: _RunShape, pub: _Publisher) -> int:
    records = list(_valid_records(read_nodes(rnd, run.problems), rnd.node_file, run.problems))
    shape.group_size = max([shape.group_size, *Counter(r.sibling_group for r in records).values()])
    shape.gate = shape.gate or any(isinstance(r, GateNodeRecord) for r in records)
    shape.last_round = max(shape.last_round, rnd.round)
    at = float(rnd.started_unix or shape.t0)
    started = _round_started(rnd, shape.model, shape.expansions, shape.group_size)
    await pub.add([events.make_event(run.run_id, PRODUCER, started, at=at)])
    index: Counter[str] = Counter()
    for r in records:
        await pub.add(node_events(run.run_id, r, shape.group_size, index[r.sibling_group], shape.model, at))
        index[r.sibling_group] += 1
    await pub.add(list(group_events(run.run_id, records, shape.group_size, at)))
    if rnd.summary is not None:
        done = _round_completed(rnd)
        await pub.add([events.make_event(run.run_id, PRODUCER, done, at=float(rnd.completed_unix or at))])
    return len(records)


async def import_run(bus, path: str | Path, on_bytes: Callable[[int], None] | None = None) -> ImportResult:
    run: SeedRun = read_run(path)
    events.check_token(run.run_id, "run id")
    result = ImportResult(run.run_id, problems=run.problems)
    pub = _Publisher(bus, await existing_subjects(bus, run.run_id), result)
    shape = _RunShape(
        t0=float(min((r.started_unix for r in run.rounds if r.started_unix), default=0)),
        model=next((r.summary.model for r in run.rounds if r.summary), ""),
        expansions=max((r.summary.expansions for r in run.rounds if r.summary), default=0),
    )
    for rnd in run.rounds:
        result.nodes += await _import_round(run, rnd, shape, pub)
        size = rnd.node_file.stat().st_size if rnd.node_file else 0
        result.bytes += size
        if on_bytes is not None:
            on_bytes(size)
    seen: Counter[int] = Counter()
    for line in run.timing:
        await pub.add([step_event(run.run_id, line, seen[line.step], shape.t0)])
        seen[line.step] += 1
    start = run_started(
        run.run_id,
        run.tasks,
        shape.last_round,
        shape.expansions,
        shape.group_size,
        shape.gate,
        bool(run.timing),
        shape.model,
    )
    # run.started goes last so a service that watches for new runs sees a complete history
    await pub.add([events.make_event(run.run_id, PRODUCER, start, at=shape.t0)])
    complete = all(r.summary is not None for r in run.rounds if r.started_unix)
    outcome = pb.RunCompleted(
        outcome="completed" if complete else "stopped", reason="imported from a seed-format archive"
    )
    await pub.add([events.make_event(run.run_id, PRODUCER, outcome, at=shape.t0)])
    await pub.flush()
    return result


def _round_started(rnd, model: str, expansions: int, group_size: int) -> pb.RoundStarted:
    s = rnd.summary
    return pb.RoundStarted(
        task=rnd.task,
        round=rnd.round,
        policy_version=max(rnd.round - 1, 0),
        model=s.model if s else model,
        adapter_path=s.adapter_path if s else "",
        started_unix=rnd.started_unix or 0,
        expansions=s.expansions if s else expansions,
        group_size=group_size,
    )


def _round_completed(rnd) -> pb.RoundCompleted:
    s = rnd.summary
    c = pb.RoundCompleted(
        task=rnd.task,
        round=rnd.round,
        model=s.model,
        adapter_path=s.adapter_path,
        nodes=s.nodes,
        valid=s.valid,
        expansions=s.expansions,
        phase=s.phase,
        best_node_id=s.best_node_id or "",
        rollout_file=s.rollout_file,
        workspace=s.workspace,
        gen_llm_seconds=s.gen_llm_seconds,
        gen_exec_seconds=s.gen_exec_seconds,
        completed_unix=rnd.completed_unix or 0,
        started_unix=rnd.started_unix or 0,
    )
    if s.best_test_metric is not None:
        c.best_test_metric = s.best_test_metric
    if s.honest_test_metric is not None:
        c.honest_test_metric = s.honest_test_metric
    return c


async def import_root(
    bus, root: str | Path, on_bytes: Callable[[int], None] | None = None
) -> list[ImportResult]:
    """Import every run under a seed-format data root (or the one run directory given)."""
    results = []
    for path in find_runs(root):
        try:
            result = await import_run(bus, path, on_bytes)
        except ValueError as exc:  # a run directory whose name cannot be a run id
            result = ImportResult(path.name, problems=[Problem(path, 0, f"run skipped: {exc}")])
        for p in result.problems:
            log.warning("%s", p)
        results.append(result)
    return results
