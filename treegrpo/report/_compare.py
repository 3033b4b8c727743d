"""Train arm vs its no-train control: did training, not search, raise the late rounds?

Both arms run one seed, tasks, prompts and tree shape; the control never updates the policy. Each
node gets the sample score against the round-1 nodes of both arms (`_learning.scorers`). Sibling
groups are paired by where they sit in the tree (task, round, step): the difference of the late
rounds' mean score (train − control) gets a 95 % interval from resampling those pairs within each
task. Round 1 comes before any update, so there the arms must agree: token for token when sampling
is seeded per group (the sampler's seeds ignore the run id), else within noise.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from treegrpo.report import _stats
from treegrpo.report._data import RunData
from treegrpo.report._learning import first_round, scorers, scores
from treegrpo.report._stats import Estimate

Key = tuple[str, int, int]  # task, round, step: one sibling group's place in the tree


@dataclass
class Difference:
    difference: Estimate
    train: float | None
    control: float | None
    groups: int
    min_difference: float = 0.0

    @property
    def verdict(self) -> str:
        return _stats.verdict(self.difference, self.min_difference)

    def as_dict(self) -> dict:
        return {
            "difference": self.difference.value,
            "ci95": self.difference.ci95,
            "verdict": self.verdict,
            "train": self.train,
            "control": self.control,
            "groups": self.groups,
        }


@dataclass
class Agreement:
    identical_share: float | None  # round-1 completions token-identical in both arms (None: no tokens)
    difference: Estimate  # round-1 score, train − control

    @property
    def ok(self) -> bool:
        if self.identical_share is not None and self.identical_share >= 0.99:
            return True
        d = self.difference
        return d.lo is not None and d.hi is not None and d.lo <= 0 <= d.hi

    def as_dict(self) -> dict:
        return {
            "identical_share": self.identical_share,
            "difference": self.difference.value,
            "ci95": self.difference.ci95,
            "ok": self.ok,
        }


@dataclass
class Comparison:
    train_run: str
    control_run: str
    late_rounds: list[int]
    pooled: Difference
    round1: Agreement
    tasks: dict[str, Difference] = field(default_factory=dict)

    @property
    def verdict(self) -> str:
        return self.pooled.verdict

    def as_dict(self) -> dict:
        return {
            "verdict": self.verdict,
            "min_difference": self.pooled.min_difference,
            "train_run": self.train_run,
            "control_run": self.control_run,
            "late_rounds": self.late_rounds,
            "pooled": self.pooled.as_dict(),
            "round1": self.round1.as_dict(),
            "tasks": {t: d.as_dict() for t, d in self.tasks.items()},
        }


def default_late_from(rounds: Sequence[int]) -> int:
    """The later half of the rounds, never round 1: R=2 -> {2}, 3 -> {2,3}, 4 -> {3,4}, 5 -> {3,4,5}."""
    return max(2, max(rounds, default=1) // 2 + 1)


def _groups(data: RunData, score_of: dict[str, float]) -> dict[Key, list[float]]:
    out: dict[Key, list[float]] = defaultdict(list)
    for r in data.records:
        if r.id in score_of:
            out[(r.exp_id, r.round, r.step)].append(score_of[r.id])
    return out


def _difference(
    train: dict[Key, list[float]],
    control: dict[Key, list[float]],
    keys: list[Key],
    n: int,
    seed: int,
    min_difference: float = 0.0,
) -> Difference:
    a, b = [train.get(k, []) for k in keys], [control.get(k, []) for k in keys]
    est = _stats.paired_difference(a, b, [k[0] for k in keys], n, seed)
    mean = lambda xs: float(np.mean(xs)) if xs else None  # noqa: E731
    return Difference(
        est, mean([v for g in a for v in g]), mean([v for g in b for v in g]), len(keys), min_difference
    )


def _identical_share(train: RunData, control: RunData) -> float | None:
    """Round-1 completions present in both arms with the same tokens, matched within each sibling
    group as multisets (an id hashes the run id, so nodes are matched by place and content)."""

    def by_group(d: RunData) -> dict[Key, Counter]:
        first, out = first_round(d.records), defaultdict(Counter)
        for r in d.records:
            if r.round == first[r.exp_id] and r.id in d.fingerprints:
                out[(r.exp_id, r.round, r.step)][d.fingerprints[r.id]] += 1
        return out

    t, c = by_group(train), by_group(control)
    total = sum(
        max(sum(t.get(k, Counter()).values()), sum(c.get(k, Counter()).values())) for k in set(t) | set(c)
    )
    if not total:
        return None
    same = sum(sum((t[k] & c[k]).values()) for k in set(t) & set(c))
    return same / total


def compare(
    train: RunData,
    control: RunData,
    late_from: int | None = None,
    n: int = 2000,
    seed: int = 0,
    min_difference: float = 0.0,
) -> Comparison:
    by_task = scorers([train, control])
    gt, gc = _groups(train, scores(train, by_task)), _groups(control, scores(control, by_task))
    rounds = sorted({k[1] for k in gt} & {k[1] for k in gc})
    late_from = default_late_from(rounds) if late_from is None else late_from
    late = [r for r in rounds if r >= late_from]
    keys = sorted(k for k in set(gt) | set(gc) if k[1] in late)
    first = {**first_round(control.records), **first_round(train.records)}
    r1 = sorted(k for k in set(gt) | set(gc) if k[1] == first.get(k[0]))
    tasks = sorted({k[0] for k in keys})
    return Comparison(
        train_run=train.run_id,
        control_run=control.run_id,
        late_rounds=late,
        pooled=_difference(gt, gc, keys, n, seed, min_difference),
        round1=Agreement(_identical_share(train, control), _difference(gt, gc, r1, n, seed).difference),
        tasks={
            t: _difference(gt, gc, [k for k in keys if k[0] == t], n, seed, min_difference) for t in tasks
        },
    )
