"""What the report reads, from either source: the bus (a run's events) or a seed-format root.

Both give the same `RunData`: light node records (no prompt, code or logprobs), round summaries,
timing lines, and per node the few texts and token numbers the HTML explorer shows (`NodeText`:
plan, code, output tail, response length, mean log-prob; not the prompt, thinking or per-token
lists). So the seed's runs (imported or read straight from files) and new runs are measured and
shown by the same code.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path

from treegrpo.archive import (
    GateNodeRecord,
    NodeRecord,
    Problem,
    RoundSummary,
    RunFacts,
    SampledFacts,
    TimingLine,
    collect_facts,
    find_runs,
    node_record,
    read_nodes,
    read_run,
    round_summary,
    sampled_bodies,
    timing_line,
)
from treegrpo.events import short_hash

# treegrpo.tasks' LOAD_SOURCE and LOAD_TASKS, named here because importing the tasks package pulls in
# pandas, which the report does not need (a unit test keeps the two in step)
LOAD_SOURCE = "load"
LOAD_TASK_IDS = frozenset({"load-bytes"})
BUSY_METRIC = "gpu_busy_share"  # a learner.step metric: GPU busy time / wall time over the step
# learner.step metrics the report shows per run (the policy's entropy; groups left out for no signal)
STEP_METRICS = ("entropy", "groups_skipped_no_signal")
LOAD_LINE = "load run: scores come from completion bytes; not a learning measurement"


@dataclass(frozen=True, slots=True)
class NodeText:
    """What the explorer shows of one node beyond its record's numbers."""

    plan: str = ""
    code: str = ""
    term_tail: str = ""
    tokens: int = 0  # response tokens
    mean_logprob: float | None = None  # mean behaviour log-prob of those tokens

    @classmethod
    def of(cls, plan: str, code: str, term_tail: str, logprobs, n_tokens: int) -> NodeText:
        lp = list(logprobs)
        return cls(plan, code, term_tail, n_tokens, sum(lp) / len(lp) if lp else None)


@dataclass(frozen=True, slots=True)
class Respent:
    """One `group.respent` decision (run.tree.respend): the zero-variance group, its new one."""

    task: str
    round: int
    step: int
    group: str  # the zero-variance group
    respend_group: str  # "" when nothing was re-spent
    siblings: int
    reserved_tokens: int
    why: str

    @classmethod
    def of(cls, d) -> Respent:
        return cls(
            d.task,
            d.round,
            d.step,
            d.sibling_group,
            d.respend_group,
            d.extra_siblings,
            d.reserved_tokens,
            d.why,
        )


@dataclass
class RunData:
    run_id: str
    records: list[NodeRecord] = field(default_factory=list)
    summaries: dict[tuple[str, int], RoundSummary] = field(default_factory=dict)
    timing: list[TimingLine] = field(default_factory=list)
    step_groups: dict[int, list[str]] = field(default_factory=dict)  # step -> sibling groups trained on
    source: str = ""
    problems: list[Problem] = field(default_factory=list)
    versions: dict[str, int] = field(default_factory=dict)  # node id -> policy version that sampled it
    fingerprints: dict[str, str] = field(default_factory=dict)  # node id -> hash of its completion tokens
    texts: dict[str, NodeText] = field(default_factory=dict)  # node id -> plan, code, output tail, tokens
    # node id -> sibling group of the nodes masked by infrastructure faults (status `infrastructure`):
    # not records (no outcome of the policy's), counted apart; a seed-format root has none
    infrastructure: dict[str, str] = field(default_factory=dict)
    # node id -> its newest attempt, of the nodes run again after an infrastructure fault
    # (`treegrpo run --resume --retry-masked`); their records are their newest attempt's
    retried: dict[str, int] = field(default_factory=dict)
    gpu_busy: dict[int, float] = field(default_factory=dict)  # step -> GPU busy share, where recorded
    step_metrics: dict[int, dict[str, float]] = field(default_factory=dict)  # step -> STEP_METRICS recorded
    respent: list[Respent] = field(default_factory=list)  # re-spend decisions (a seed root has none)

    @property
    def load(self) -> bool:
        """A systems load run (treegrpo/tasks/_load.py): its scores say nothing about the policy."""
        return any(r.source == LOAD_SOURCE or r.exp_id in LOAD_TASK_IDS for r in self.records)

    @property
    def gate(self) -> bool:
        return any(isinstance(r, GateNodeRecord) for r in self.records)

    @property
    def tasks(self) -> list[str]:
        return sorted({r.exp_id for r in self.records} | {t for t, _ in self.summaries})


def fingerprint(token_ids) -> str:
    """A short hash of a completion's token ids: the round-1 agreement check compares these."""
    return short_hash("tokens", ",".join(map(str, token_ids)), n=16)


def _light(r: NodeRecord) -> NodeRecord:
    return dataclasses.replace(
        r,
        plan="",
        code="",
        raw_completion="",
        thinking="",
        prompt_messages=[],
        response_token_ids=[],
        response_logprobs=[],
        term_tail="",
    )


class BusReading:
    """A run's `RunData` from the bus: its small facts, then its `node.sampled` bodies one by one
    (`accept`), in whichever pass reads them: `load_from_bus`'s own, or the export's when the
    runner ends a run (one pass for both)."""

    def __init__(self, facts: RunFacts):
        self.facts = facts
        self.data = RunData(facts.run_id, source=f"bus:{facts.run_id}")
        self.sampled: dict[str, SampledFacts] = {}

    def check(self) -> None:
        f = self.facts
        if not f.graded and f.started is None and not f.steps:
            raise LookupError(f"run {f.run_id!r} has no events on the bus")

    def accept(self, body) -> None:
        """One `node.sampled`: the big event, of which a few numbers and texts are kept."""
        data = self.data
        data.versions[body.node_id] = body.policy_version
        data.fingerprints[body.node_id] = fingerprint(body.response_token_ids)
        self.sampled[body.node_id] = SampledFacts.of(body)
        ex = self.facts.executed.get(body.node_id)
        data.texts[body.node_id] = NodeText.of(
            body.plan,
            body.code,
            ex.term_tail if ex is not None else "",
            body.response_logprobs,
            len(body.response_token_ids),
        )

    def finish(self) -> RunData:
        self.check()
        facts, data = self.facts, self.data
        data.infrastructure = {nid: g.sibling_group for nid, g in facts.infrastructure.items()}
        data.retried = dict(facts.retried)
        gate = facts.resource_gate
        for s in facts.steps:
            data.timing.append(timing_line(s))
            if BUSY_METRIC in s.metrics:
                data.gpu_busy[s.step] = s.metrics[BUSY_METRIC]
            if shown := {k: s.metrics[k] for k in STEP_METRICS if k in s.metrics}:
                data.step_metrics[s.step] = shown
            if s.sibling_groups:
                data.step_groups[s.step] = list(s.sibling_groups)
        data.respent = [
            Respent.of(d) for d in sorted(facts.respent.values(), key=lambda d: (d.round, d.task, d.step))
        ]
        for key in sorted(facts.rounds, key=lambda k: (k[1], k[0])):
            rf = facts.rounds[key]
            recs = [
                node_record(facts.graded[nid], facts.executed.get(nid), facts.rewards.get(nid), gate)
                for nid in rf.node_ids
            ]
            data.records += recs
            summary = round_summary(facts, rf, recs, self.sampled)
            if summary is not None:
                data.summaries[key] = summary
        return data


async def load_from_bus(bus, run_id: str) -> RunData:
    reading = BusReading(await collect_facts(bus, run_id))  # the small facts the export reads too
    reading.check()
    async for sampled in sampled_bodies(bus, run_id):  # with their tokens.recorded payload inline
        reading.accept(sampled)
    return reading.finish()


def load_from_root(path: str | Path) -> list[RunData]:
    out = []
    for run_dir in find_runs(path):
        run = read_run(run_dir)
        data = RunData(run.run_id, timing=run.timing, source=str(run_dir), problems=run.problems)
        for rnd in run.rounds:
            nodes = read_nodes(rnd, run.problems)
            data.fingerprints |= {r.id: fingerprint(r.response_token_ids) for r in nodes}
            data.texts |= {
                r.id: NodeText.of(
                    r.plan or "",
                    r.code or "",
                    r.term_tail or "",
                    r.response_logprobs,
                    len(r.response_token_ids),
                )
                for r in nodes
            }
            # the files carry no policy version: sync, as `archive import` assumes (round r: r - 1)
            data.versions |= {r.id: max(r.round - 1, 0) for r in nodes}
            data.records += [_light(r) for r in nodes]
            if rnd.summary is not None:
                data.summaries[(rnd.task, rnd.round)] = rnd.summary
        out.append(data)
    return out
