"""The seed's measurements of one run, computed from its node records, summaries and timing lines."""

from __future__ import annotations

import statistics
from collections import Counter
from dataclasses import dataclass, field

from treegrpo.advantages import MIN_SIBLINGS, has_signal
from treegrpo.archive import PHASES, STATUSES, GateNodeRecord, NodeRecord
from treegrpo.events import Status
from treegrpo.report._data import RunData


@dataclass
class Ratio:
    k: int = 0
    n: int = 0

    @property
    def rate(self) -> float | None:
        return self.k / self.n if self.n else None


@dataclass
class GpuStats:
    declared: int  # nodes whose parsed declaration asks for >= 1 GPU
    gpu_idle_errors: int  # nodes killed for leaving a declared GPU idle (exc_type GpuIdleError)
    malformed: int  # decl_malformed: the # /// script block could not be parsed
    miss_reasons: dict[str, int]


@dataclass
class RoundRow:
    task: str
    round: int
    nodes: int
    valid: int
    crash_rate: float | None
    best_test_metric: float | None
    best_oriented: float | None
    from_summary: bool


@dataclass
class PhaseStat:
    median_s: float
    share: float  # sum of this phase over steps / sum of total_s


@dataclass
class Signal:
    estimator: str
    groups: int  # complete sibling groups (all G members recorded) with rewards
    with_signal: int
    partial_groups: int  # groups of a round that stopped mid-group: not counted above
    trained_groups: int  # complete groups of rounds that have a logged training step
    trained_with_signal: int
    gpu_hours: float | None  # sum(total_s) x gpus / 3600
    per_gpu_hour: float | None  # trained_with_signal / gpu_hours
    dropped_groups: int = 0  # too few siblings left after infrastructure faults: not counted above

    @property
    def share(self) -> float | None:
        return self.with_signal / self.groups if self.groups else None


@dataclass
class Respend:
    """Zero-variance groups re-spent by the search (run.tree.respend) and what the learner skipped."""

    decisions: int = 0  # zero-variance groups the sampler decided on
    groups: int = 0  # ... of them given new siblings
    siblings: int = 0  # new siblings sampled for them
    tokens_reserved: int = 0
    tokens_generated: int = 0  # response tokens the new siblings generated (<= reserved)
    with_signal: int = 0  # re-spent groups whose new siblings carry a learning signal
    skipped_no_signal: int = 0  # groups the learner's steps left out for want of signal


@dataclass
class RunMetrics:
    run_id: str
    source: str
    schema: str
    tasks: list[str]
    nodes: int
    statuses: dict[str, int]
    crash_rate: float | None
    valid_rate: float | None
    improve_keeps_valid: Ratio
    debug_fixes_parent: Ratio
    gpu: GpuStats | None
    rounds: list[RoundRow]
    steps: int
    total_s_median: float | None
    phases: dict[str, PhaseStat]
    node_cost_s: float | None  # median over steps of total_s / nodes that step trained on
    signal: Signal
    problems: list[str] = field(default_factory=list)
    infrastructure: int = 0  # nodes masked by infrastructure faults: not in `nodes` nor `statuses`
    retried: int = 0  # nodes run again after an infrastructure fault (--retry-masked), masked or not now
    load_run: bool = False  # a systems load run: scores from completion bytes, never learning
    respend: Respend = field(default_factory=Respend)
    entropy: list[float] = field(default_factory=list)  # the policy's mean entropy per logged step


def _rate(k: int, n: int) -> float | None:
    return k / n if n else None


def _parent_outcomes(records: list[NodeRecord]) -> tuple[Ratio, Ratio]:
    """Follow parent_id across the whole run (every round, partial ones included)."""
    status = {r.id: r.status for r in records}
    improve, debug = Ratio(), Ratio()
    for r in records:
        parent = status.get(r.parent_id) if r.parent_id else None
        if parent is None:
            continue
        if r.mode == "improve" and parent == Status.OK:
            improve.n += 1
            improve.k += r.status == Status.OK
        elif r.mode == "debug" and parent != Status.OK:
            debug.n += 1
            debug.k += r.status == Status.OK
    return improve, debug


def _gpu(records: list[NodeRecord]) -> GpuStats | None:
    gated = [r for r in records if isinstance(r, GateNodeRecord)]
    if not gated:
        return None
    return GpuStats(
        declared=sum(bool(r.resources) and (r.resources.get("gpu") or 0) >= 1 for r in gated),
        gpu_idle_errors=sum(r.exc_type == "GpuIdleError" for r in records),
        malformed=sum(r.decl_malformed for r in gated),
        miss_reasons=dict(sorted(Counter(r.decl_miss_reason for r in gated if r.decl_miss_reason).items())),
    )


def _rounds(data: RunData) -> list[RoundRow]:
    by_round: dict[tuple[str, int], list[NodeRecord]] = {}
    for r in data.records:
        by_round.setdefault((r.exp_id, r.round), []).append(r)
    rows = []
    for key in sorted(set(by_round) | set(data.summaries), key=lambda k: (k[1], k[0])):
        recs = by_round.get(key, [])
        valid = [r for r in recs if r.status == Status.OK and r.oriented is not None]
        best = max(valid, key=lambda r: r.oriented, default=None)
        s = data.summaries.get(key)
        rows.append(
            RoundRow(
                task=key[0],
                round=key[1],
                nodes=len(recs),
                valid=sum(r.status == Status.OK for r in recs),
                crash_rate=_rate(sum(r.status == Status.CRASHED for r in recs), len(recs)),
                best_test_metric=s.best_test_metric if s else (best.test_metric if best else None),
                best_oriented=best.oriented if best else None,
                from_summary=s is not None,
            )
        )
    return rows


def _phases(data: RunData) -> dict[str, PhaseStat]:
    total = sum(t.total_s for t in data.timing)
    out = {}
    for p in PHASES:
        vals = [t.phases_s[p] for t in data.timing if p in t.phases_s]
        if vals:
            out[p] = PhaseStat(statistics.median(vals), sum(vals) / total if total else 0.0)
    return out


def step_nodes(data: RunData) -> dict[int, int]:
    """Nodes each logged step trained on: its sibling groups' members (the learner's
    `sibling_groups`), or for seed runs the round whose number is the step."""
    per_group = Counter(r.sibling_group for r in data.records)
    per_round = Counter(r.round for r in data.records)
    out = {}
    for t in data.timing:
        groups = data.step_groups.get(t.step)
        out[t.step] = sum(per_group[g] for g in groups) if groups else per_round.get(t.step, 0)
    return out


def _node_cost(data: RunData) -> float | None:
    nodes = step_nodes(data)
    costs = [t.total_s / nodes[t.step] for t in data.timing if nodes[t.step]]
    return statistics.median(costs) if costs else None


def _signal(data: RunData, estimator: str, gpus: int) -> Signal:
    groups: dict[str, list[NodeRecord]] = {}
    for r in data.records:
        groups.setdefault(r.sibling_group, []).append(r)
    masked = Counter(data.infrastructure.values())  # a group's masked siblings are not partial
    respent = {d.respend_group: d.siblings for d in data.respent if d.siblings}  # sized by its decision
    size = max((len(g) + masked[gid] for gid, g in groups.items() if gid not in respent), default=0)
    trained_groups = {g for gs in data.step_groups.values() for g in gs}
    stepped_rounds = {t.step for t in data.timing}
    sig = Signal(estimator, 0, 0, 0, 0, 0, None, None)
    sig.dropped_groups = sum(1 for gid, n in masked.items() if len(groups.get(gid, [])) < MIN_SIBLINGS)
    for gid, members in groups.items():
        if len(members) + masked[gid] < respent.get(gid, size) or any(m.reward is None for m in members):
            sig.partial_groups += 1
            continue
        if len(members) < MIN_SIBLINGS and masked[gid]:
            continue  # dropped: counted above
        signal = has_signal(estimator, [m.reward for m in members], [m.status for m in members])
        sig.groups += 1
        sig.with_signal += signal
        # a group was trained on if the learner says so, else (seed runs) if its round's step was logged
        if gid in trained_groups or (not trained_groups and members[0].round in stepped_rounds):
            sig.trained_groups += 1
            sig.trained_with_signal += signal
    if data.timing:
        sig.gpu_hours = sum(t.total_s for t in data.timing) * gpus / 3600
        sig.per_gpu_hour = sig.trained_with_signal / sig.gpu_hours if sig.gpu_hours else None
    return sig


def _respend(data: RunData, estimator: str) -> Respend:
    out = Respend(decisions=len(data.respent))
    members: dict[str, list[NodeRecord]] = {}
    for r in data.records:
        members.setdefault(r.sibling_group, []).append(r)
    for d in data.respent:
        if not d.siblings:
            continue
        new = members.get(d.respend_group, [])
        out.groups += 1
        out.tokens_reserved += d.reserved_tokens
        out.siblings += len(new)
        out.tokens_generated += sum(data.texts[r.id].tokens for r in new if r.id in data.texts)
        if new and all(r.reward is not None for r in new):
            out.with_signal += has_signal(estimator, [r.reward for r in new], [r.status for r in new])
    out.skipped_no_signal = int(sum(m.get("groups_skipped_no_signal", 0) for m in data.step_metrics.values()))
    return out


def compute(data: RunData, estimator: str = "grpo_valid_only", gpus: int = 1) -> RunMetrics:
    recs = data.records
    counts = Counter(r.status for r in recs)
    statuses = {s: counts.get(s, 0) for s in STATUSES} | {
        s: c for s, c in sorted(counts.items()) if s not in STATUSES
    }
    improve, debug = _parent_outcomes(recs)
    totals = [t.total_s for t in data.timing]
    return RunMetrics(
        run_id=data.run_id,
        source=data.source,
        schema="32-key (resource gate)" if data.gate else "25-key",
        tasks=data.tasks,
        nodes=len(recs),
        statuses=statuses,
        crash_rate=_rate(counts.get(Status.CRASHED, 0), len(recs)),
        valid_rate=_rate(counts.get(Status.OK, 0), len(recs)),
        improve_keeps_valid=improve,
        debug_fixes_parent=debug,
        gpu=_gpu(recs),
        rounds=_rounds(data),
        steps=len(data.timing),
        total_s_median=statistics.median(totals) if totals else None,
        phases=_phases(data),
        node_cost_s=_node_cost(data),
        signal=_signal(data, estimator, gpus),
        problems=[str(p) for p in data.problems],
        infrastructure=len(data.infrastructure),
        retried=len(data.retried),
        load_run=data.load,
        respend=_respend(data, estimator),
        entropy=[
            data.step_metrics[k]["entropy"]
            for k in sorted(data.step_metrics)
            if "entropy" in data.step_metrics[k]
        ],
    )
