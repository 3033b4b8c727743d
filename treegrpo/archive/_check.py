"""The invariants the seed states for its archive, checked on every export and import.

- a round summary's `nodes` and `valid` equal the node file's count of records and of `ok` records
  (so valid / nodes is the round's own valid rate);
- `best_node_id` names a record of the round whose `test_metric` equals `best_test_metric`
  (both null when the round has no valid node);
- each timing.jsonl line's phases sum to approximately `total_s`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from treegrpo.archive._schema import NodeRecord, RoundSummary, TimingLine
from treegrpo.events import Status

# "approximately": the seed's steps have a little untimed overhead between phases
PHASE_REL_TOL = 0.10
PHASE_ABS_TOL_S = 2.0


@dataclass(frozen=True)
class Violation:
    run_id: str
    where: str
    message: str

    def __str__(self) -> str:
        return f"{self.run_id} {self.where}: {self.message}"


def check_round(run_id: str, s: RoundSummary, records: Sequence[NodeRecord]) -> list[Violation]:
    where = f"round_{s.round} {s.exp_id}"
    out: list[Violation] = []
    valid = sum(r.status == Status.OK for r in records)
    if s.nodes != len(records):
        out.append(
            Violation(run_id, where, f"summary nodes={s.nodes} but the node file has {len(records)} records")
        )
    if s.valid != valid:
        out.append(Violation(run_id, where, f"summary valid={s.valid} but {valid} records have status ok"))
    if s.best_node_id is None:
        if s.best_test_metric is not None:
            out.append(Violation(run_id, where, f"best_test_metric={s.best_test_metric} but no best_node_id"))
        return out
    best = next((r for r in records if r.id == s.best_node_id), None)
    if best is None:
        out.append(Violation(run_id, where, f"best_node_id {s.best_node_id} is not in the node file"))
    elif not _same(best.test_metric, s.best_test_metric):
        out.append(
            Violation(
                run_id,
                where,
                f"best_node_id {s.best_node_id} has test_metric {best.test_metric}, "
                f"summary says best_test_metric={s.best_test_metric}",
            )
        )
    return out


def _same(a: float | None, b: float | None) -> bool:
    if a is None or b is None:
        return a is b
    return a == b or math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)


def phases_match(line: TimingLine) -> bool:
    total = sum(line.phases_s.values())
    return abs(total - line.total_s) <= max(PHASE_ABS_TOL_S, PHASE_REL_TOL * abs(line.total_s))


def check_timing(run_id: str, lines: Sequence[TimingLine]) -> list[Violation]:
    return [
        Violation(
            run_id,
            f"timing.jsonl step {t.step}",
            f"phases sum to {sum(t.phases_s.values()):.2f}s but total_s={t.total_s:.2f}s",
        )
        for t in lines
        if not phases_match(t)
    ]
