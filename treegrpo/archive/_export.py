"""Export: project runs from the log into the seed's data-root layout.

Two passes over each run's events: first the small facts (rounds, executed, graded, group rewards,
learner steps), then the `node.sampled` bodies in stream order (each with its `tokens.recorded`
payload put back inline: `sampled_bodies`), each joined in O(1) and written straight out. A caller
that also reads the run (the runner's report) hands in the facts it read and a reader of the bodies
(`facts`, `on_sampled`): both passes then serve both. The same log
always gives byte-identical files: nothing depends on the clock, the host, dict iteration of
unordered input, or the order replies arrive in.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from pathlib import Path

from treegrpo import events
from treegrpo.archive._check import Violation
from treegrpo.archive._join import RunFacts
from treegrpo.archive._writer import ExportResult, RunWriter
from treegrpo.events import Kind
from treegrpo.v1 import events_pb2 as pb

log = logging.getLogger(__name__)

SMALL_KINDS = (
    Kind.RUN_STARTED,
    Kind.ROUND_STARTED,
    Kind.ROUND_COMPLETED,
    Kind.NODE_EXECUTED,
    Kind.NODE_GRADED,
    Kind.GROUP_SCORED,
    Kind.LEARNER_STEPPED,
    Kind.GROUP_RESPENT,
    Kind.NODE_RETRIED,
)
# the node bodies: the node facts and their payloads (in their own fact since `tokens.recorded`),
# joined back into the one body the seed's node records project from (`events.inline_tokens`)
SAMPLED_KINDS = (Kind.TOKENS_RECORDED, Kind.NODE_SAMPLED)


class ArchiveInvariantError(RuntimeError):
    """An exported run breaks one of the seed's invariants; the files are written for inspection."""

    def __init__(self, violations: Sequence[Violation]):
        self.violations = list(violations)
        shown = "\n  ".join(str(v) for v in self.violations[:20])
        more = f"\n  … and {len(self.violations) - 20} more" if len(self.violations) > 20 else ""
        super().__init__(f"{len(self.violations)} invariant violation(s):\n  {shown}{more}")


async def collect_facts(bus, run_id: str, kinds: Sequence[str] = SMALL_KINDS) -> RunFacts:
    facts = RunFacts(run_id)
    async for _, event in bus.replay(run_id, kinds=list(kinds)):
        facts.add(event)
    return facts


async def sampled_bodies(bus, run_id: str) -> AsyncIterator[pb.NodeSampled]:
    """The run's `node.sampled` bodies in stream order, each with its payload inline as the seed's
    records hold it: a node fact of a run that records it apart gets its `tokens.recorded` back
    (published right before it, so held for one message); one of a run before that (or imported)
    has it already. A node whose payload never came is handed out last, without it."""
    join = events.TokenJoin()
    async for _, event in bus.replay(run_id, kinds=SAMPLED_KINDS):
        whole = join.accept(event)
        if whole is not None:
            yield whole
    for whole in join.rest():
        log.warning("%s: node %s: its tokens.recorded is missing", run_id, whole.node_id)
        yield whole


async def export_run(
    bus,
    run_id: str,
    out_dir: str | Path,
    on_node: Callable[[int], None] | None = None,
    facts: RunFacts | None = None,
    on_sampled: Callable[[pb.NodeSampled], None] | None = None,
) -> ExportResult:
    """Write one run; `facts`: its small facts if already read, `on_sampled`: sees each body too."""
    facts = facts if facts is not None else await collect_facts(bus, run_id)
    if facts.started is None and not facts.rounds and not facts.steps:
        raise LookupError(f"run {run_id!r} has no events on the bus")
    writer = RunWriter(facts, Path(out_dir))
    async for sampled in sampled_bodies(bus, run_id):
        writer.accept(sampled)
        if on_sampled is not None:
            on_sampled(sampled)
        if on_node is not None:
            on_node(len(sampled.response_logprobs))
    result = writer.finish()
    if result.ungraded_skipped:
        log.warning("%s: %d sampled node(s) not graded yet were left out", run_id, result.ungraded_skipped)
    if result.infrastructure_skipped:
        log.warning(
            "%s: %d node(s) masked by infrastructure faults were left out (not the policy's outcomes)",
            run_id,
            result.infrastructure_skipped,
        )
    return result


async def export_runs(
    bus,
    run_ids: Sequence[str],
    out_dir: str | Path,
    strict: bool = True,
    on_node: Callable[[int], None] | None = None,
    facts: Mapping[str, RunFacts] | None = None,
    on_sampled: Callable[[str, pb.NodeSampled], None] | None = None,
) -> list[ExportResult]:
    """Export each run to `out_dir/<run_id>/`. With `strict`, any invariant violation raises
    `ArchiveInvariantError` after every run is written (the files stay, for inspection).
    `facts`: runs' small facts already read; `on_sampled(run_id, body)`: a second reader."""
    facts = facts or {}
    results = []
    for rid in run_ids:
        also = None if on_sampled is None else functools.partial(on_sampled, rid)
        results.append(await export_run(bus, rid, out_dir, on_node, facts.get(rid), also))
    violations = [v for r in results for v in r.violations]
    for v in violations:
        log.warning("invariant: %s", v)
    if strict and violations:
        raise ArchiveInvariantError(violations)
    return results
