"""Learning curves of one run: per task and pooled, by round and by policy version.

Per cell (task × round, or task × version): failed share, mean and median oriented metric of the
valid nodes, and the sample score (`_stats.mid_rank_scorer` against round 1), each with a 95 %
interval that resamples sibling groups. Raw metrics are not pooled over tasks (log loss and AUC do
not add); the failed share and the sample score are.

Improve/debug rounds pick their parents among the round's best nodes, so tree search alone raises
later steps and rounds of a run that never trains: a rising curve is not learning by itself; only a
paired no-train control (`_compare`) separates the two.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from treegrpo.archive import NodeRecord
from treegrpo.events import Status
from treegrpo.report import _stats
from treegrpo.report._data import RunData
from treegrpo.report._stats import FAIL, Estimate

POOLED = "pooled"
Scorer = Callable[[float], float]


def value(r: NodeRecord) -> float:
    """The oriented metric of a valid node; FAIL for every other node."""
    return r.oriented if r.status == Status.OK and r.oriented is not None else FAIL


def first_round(records: Iterable[NodeRecord]) -> dict[str, int]:
    out: dict[str, int] = {}
    for r in records:
        out[r.exp_id] = min(out.get(r.exp_id, r.round), r.round)
    return out


def scorers(runs: Sequence[RunData]) -> dict[str, Scorer]:
    """Per task: the mid-rank scorer against the round-1 nodes of all `runs` together (one run: its
    own round 1; train + control: both round 1s, which a seeded pairing makes the same nodes)."""
    recs = [r for d in runs for r in d.records]
    first = first_round(recs)
    ref: dict[str, list[float]] = defaultdict(list)
    for r in recs:
        if r.round == first[r.exp_id]:
            ref[r.exp_id].append(value(r))
    return {task: _stats.mid_rank_scorer(vals) for task, vals in ref.items()}


def scores(data: RunData, by_task: dict[str, Scorer]) -> dict[str, float]:
    return {r.id: by_task[r.exp_id](value(r)) for r in data.records if r.exp_id in by_task}


@dataclass
class CurveRow:
    task: str  # a task, or "pooled"
    x: int  # round or policy version
    nodes: int
    groups: int
    failed_share: Estimate
    mean_oriented: Estimate
    median_oriented: Estimate
    score: Estimate

    def as_dict(self, axis: str) -> dict:
        out: dict = {"task": self.task, axis: self.x, "nodes": self.nodes, "groups": self.groups}
        for name in ("failed_share", "mean_oriented", "median_oriented", "score"):
            est: Estimate = getattr(self, name)
            out[name], out[f"{name}_ci95"] = est.value, est.ci95
        return out


def _cell(
    task: str, x: int, groups: dict[str, list[NodeRecord]], score_of: dict[str, float], n: int, pooled: bool
) -> CurveRow:
    members = list(groups.values())
    strata = [g[0].exp_id for g in members]
    nan = float("nan")

    def boot(get, stat=_stats.mean) -> Estimate:
        return _stats.cluster_bootstrap([[get(r) for r in g] for g in members], strata, stat, n)

    def oriented(r: NodeRecord) -> float:
        v = value(r)
        return nan if v == FAIL else v

    none = Estimate(None)
    return CurveRow(
        task=task,
        x=x,
        nodes=sum(map(len, members)),
        groups=len(members),
        failed_share=boot(lambda r: float(r.status != Status.OK)),
        mean_oriented=none if pooled else boot(oriented),
        median_oriented=none if pooled else boot(oriented, _stats.median),
        score=boot(lambda r: score_of.get(r.id, nan)),
    )


def curves(data: RunData, by_task: dict[str, Scorer], axis: str = "round", n: int = 1000) -> list[CurveRow]:
    """Rows per (task, x) and pooled per x; x = the round, or the policy version that sampled the node
    (empty when the versions are unknown, e.g. a seed-format root)."""
    key = (lambda r: r.round) if axis == "round" else (lambda r: data.versions.get(r.id))
    cells: dict[tuple[str, int], dict[str, list[NodeRecord]]] = defaultdict(lambda: defaultdict(list))
    for r in data.records:
        x = key(r)
        if x is not None:
            cells[(r.exp_id, x)][r.sibling_group].append(r)
            cells[(POOLED, x)][r.sibling_group].append(r)
    score_of = scores(data, by_task)
    tasks = sorted({t for t, _ in cells} - {POOLED}) + [POOLED]
    return [
        _cell(t, x, cells[(t, x)], score_of, n, t == POOLED)
        for t in tasks
        for x in sorted(x for tt, x in cells if tt == t)
    ]
