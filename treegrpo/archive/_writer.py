"""Write one run's projections in the seed's layout, streaming node records as they arrive.

`RunWriter` is fed the run's small facts first (`RunFacts`), then every `node.sampled` in stream
order; each node line is written the moment its sampled body arrives and a round's rendered views
are written once its last graded node has been written. Only a light copy of each record (no
prompt, tokens or logprobs) stays in memory, so memory is bounded by one round's text, not the run.
"""

from __future__ import annotations

import dataclasses
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

from treegrpo.archive._check import Violation, check_round, check_timing
from treegrpo.archive._join import RoundFacts, RunFacts, node_record, timing_line
from treegrpo.archive._render import render_transcript, render_tree
from treegrpo.archive._schema import NodeRecord, node_json, summary_json, timing_json
from treegrpo.archive._summary import SampledFacts, round_summary
from treegrpo.v1 import events_pb2 as pb

BUFFER = 1 << 20


@dataclass
class ExportResult:
    run_id: str
    path: Path
    rounds: int = 0
    nodes: int = 0
    bytes: int = 0
    ungraded_skipped: int = 0
    infrastructure_skipped: int = 0  # masked nodes (status `infrastructure`): not the seed's records
    violations: list[Violation] = field(default_factory=list)


def _light(rec: NodeRecord) -> NodeRecord:
    return dataclasses.replace(
        rec, prompt_messages=[], response_token_ids=[], response_logprobs=[], raw_completion="", thinking=""
    )


@dataclass
class _OpenRound:
    facts: RoundFacts
    handle: BinaryIO
    started_unix: int
    pending: set[str]
    light: list[NodeRecord] = field(default_factory=list)
    sampled: dict[str, SampledFacts] = field(default_factory=dict)  # what the round summary needs of them


class RunWriter:
    def __init__(self, facts: RunFacts, out_dir: Path):
        self.facts = facts
        self.final = Path(out_dir) / facts.run_id
        self.stage = Path(out_dir) / f".{facts.run_id}.partial"
        self.result = ExportResult(facts.run_id, self.final)
        self.gate = facts.resource_gate
        self._open: dict[tuple[str, int], _OpenRound] = {}
        self._written: set[str] = set()
        if self.stage.exists():
            shutil.rmtree(self.stage)
        self.stage.mkdir(parents=True)

    def _round_dir(self, round_: int) -> Path:
        d = self.stage / f"round_{round_}"
        d.mkdir(exist_ok=True)
        return d

    def _open_round(self, key: tuple[str, int]) -> _OpenRound:
        if key not in self._open:
            rf = self.facts.rounds[key]
            ts = self.facts.started_unix(rf)
            handle = open(self._round_dir(rf.round) / f"{rf.task}__{ts}.jsonl", "wb", buffering=BUFFER)
            self._open[key] = _OpenRound(rf, handle, ts, set(rf.node_ids))
        return self._open[key]

    def accept(self, sampled: pb.NodeSampled) -> None:
        """Write one node's record, if it has been graded (a node still in flight is skipped)."""
        nid = sampled.node_id
        if nid in self.facts.infrastructure:
            self.result.infrastructure_skipped += 1
            return
        graded = self.facts.graded.get(nid)
        if graded is None:
            self.result.ungraded_skipped += 1
            return
        if nid in self._written:
            return
        self._write(graded, sampled)

    def _write(self, graded: pb.NodeGraded, sampled: pb.NodeSampled | None) -> None:
        nid = graded.node_id
        key = (graded.task, graded.round)
        rec = node_record(
            graded, self.facts.executed.get(nid), self.facts.rewards.get(nid), self.gate, sampled
        )
        op = self._open_round(key)
        line = node_json(rec)
        op.handle.write(line)
        self.result.bytes += len(line)
        self.result.nodes += 1
        self._written.add(nid)
        op.light.append(_light(rec))
        if sampled is not None:
            op.sampled[nid] = SampledFacts.of(sampled)
        op.pending.discard(nid)
        if not op.pending:
            self._close_round(key)

    def _close_round(self, key: tuple[str, int]) -> None:
        op = self._open.pop(key)
        op.handle.close()
        rf, recs = op.facts, op.light
        d = self._round_dir(rf.round)
        if recs:
            self._put(d / f"{rf.task}__{op.started_unix}__tree.txt", render_tree(recs).encode())
            self._put(
                d / f"{rf.task}__{op.started_unix}__transcript.md",
                render_transcript(rf.task, rf.round, recs).encode(),
            )
        summary = round_summary(self.facts, rf, recs, op.sampled)
        if summary is not None:
            self._put(d / f"{rf.task}__summary_{rf.completed.completed_unix}.json", summary_json(summary))
            if rf.imported:  # a derived summary agrees with its records by construction; the seed's may not
                self.result.violations += check_round(self.facts.run_id, summary, recs)
        self.result.rounds += 1

    def _put(self, path: Path, data: bytes) -> None:
        path.write_bytes(data)
        self.result.bytes += len(data)

    def finish(self) -> ExportResult:
        """Graded nodes whose sampled fact never came are written without text; rounds with no
        nodes become empty stub files; then timing.jsonl, the invariants, and the atomic rename."""
        for nid, g in self.facts.graded.items():
            if nid not in self._written:
                self._write(g, None)
        for key in sorted(self.facts.rounds, key=lambda k: (k[1], k[0])):
            if key not in self._open and not self.facts.rounds[key].node_ids:
                self._open_round(key)  # round.started with no node: the seed's empty stub file
            if key in self._open:
                self._close_round(key)
        if self.facts.steps:
            lines = [timing_line(s) for s in self.facts.steps]
            self._put(self.stage / "timing.jsonl", b"".join(timing_json(t) for t in lines))
            self.result.violations += check_timing(self.facts.run_id, lines)
        if self.final.exists():
            shutil.rmtree(self.final)
        self.stage.rename(self.final)
        return self.result
