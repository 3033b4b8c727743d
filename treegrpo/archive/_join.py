"""Join the per-node facts of a run into the seed's node records (no I/O).

A node record is `node.sampled` (what the model wrote) + `node.executed` (what running it did) +
`node.graded` (the final status and score) + the node's reward from its `group.scored` members.
`RunFacts` collects the small facts of one run in one pass over the log, keyed by node id, so each
`node.sampled` met later joins in O(1).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from treegrpo import events
from treegrpo.archive._schema import (
    EXEC_TIMING_KEYS,
    PHASES,
    RESOURCE_KEYS,
    ChatMessage,
    GateNodeRecord,
    NodeRecord,
    TimingLine,
    int_if_integral,
)
from treegrpo.v1 import events_pb2 as pb


@dataclass
class RoundFacts:
    task: str
    round: int
    started: pb.RoundStarted | None = None
    completed: pb.RoundCompleted | None = None
    imported: bool = False  # round.completed came from `archive import`: it carries the seed's summary
    node_ids: list[str] = field(
        default_factory=list
    )  # node.graded order; export rewrites it in sampled order


@dataclass
class RunFacts:
    """The small facts of one run: everything but the node.sampled bodies."""

    run_id: str
    started: pb.RunStarted | None = None
    rounds: dict[tuple[str, int], RoundFacts] = field(default_factory=dict)
    executed: dict[str, pb.NodeExecuted] = field(default_factory=dict)
    graded: dict[str, pb.NodeGraded] = field(default_factory=dict)
    # nodes our side could not execute or grade (status `infrastructure`): no outcome of the
    # policy's, so not records of the seed's format; reports count them apart
    infrastructure: dict[str, pb.NodeGraded] = field(default_factory=dict)
    # nodes run again after an infrastructure fault (`--retry-masked`): node id -> its newest attempt
    # asked; its records are its newest attempt's (its masked ones stay on the log as history)
    retried: dict[str, int] = field(default_factory=dict)
    rewards: dict[str, float] = field(default_factory=dict)
    groups: dict[str, pb.GroupScored] = field(default_factory=dict)
    steps: list[pb.LearnerStepped] = field(default_factory=list)
    # zero-variance groups' re-spend decisions (run.tree.respend), by group: the seed's files have
    # no place for them (their new nodes are exported like any, at step expansions + step)
    respent: dict[str, pb.GroupRespent] = field(default_factory=dict)
    first_seen: dict[tuple[str, int], float] = field(default_factory=dict)

    def round(self, task: str, round_: int) -> RoundFacts:
        key = (task, round_)
        if key not in self.rounds:
            self.rounds[key] = RoundFacts(task, round_)
        return self.rounds[key]

    def add(self, event: pb.Event) -> None:
        """Fold one event in; later facts with the same key replace earlier ones (last write wins; a
        node's facts of an older attempt never replace its newer one's)."""
        kind = event.WhichOneof("body")
        if kind == "run_started":
            self.started = event.run_started
        elif kind == "round_started":
            self.round(event.round_started.task, event.round_started.round).started = event.round_started
        elif kind == "round_completed":
            rf = self.round(event.round_completed.task, event.round_completed.round)
            rf.completed, rf.imported = (
                event.round_completed,
                event.envelope.producer == events.IMPORTED_PRODUCER,
            )
        elif kind == "node_executed":
            ex, old = event.node_executed, self.executed.get(event.node_executed.node_id)
            if old is None or max(ex.attempt, 1) >= max(old.attempt, 1):
                self.executed[ex.node_id] = ex
        elif kind == "node_graded":
            self._add_graded(event)
        elif kind == "group_scored":
            self.groups[event.group_scored.sibling_group] = event.group_scored
            for m in event.group_scored.members:
                self.rewards[m.node_id] = m.reward
        elif kind == "learner_stepped":
            self.steps.append(event.learner_stepped)
        elif kind == "group_respent":
            self.respent[event.group_respent.sibling_group] = event.group_respent
        elif kind == "node_retried":
            r = event.node_retried
            self.retried[r.node_id] = max(self.retried.get(r.node_id, 1), r.attempt)

    def _add_graded(self, event: pb.Event) -> None:
        g = event.node_graded
        old = self.graded.get(g.node_id) or self.infrastructure.get(g.node_id)
        if old is not None and max(g.attempt, 1) < max(old.attempt, 1):
            return  # an older attempt's fact: the node is its newest attempt
        if g.status == events.INFRASTRUCTURE:
            self.infrastructure[g.node_id] = g
            return
        self.infrastructure.pop(g.node_id, None)  # a masked node's retry: it has an outcome now
        if g.node_id not in self.graded:
            self.round(g.task, g.round).node_ids.append(g.node_id)
            self.first_seen.setdefault((g.task, g.round), event.envelope.time)
        self.graded[g.node_id] = g

    def started_unix(self, rf: RoundFacts) -> int:
        """The time the round's node file is named after."""
        if rf.started is not None:
            return rf.started.started_unix
        # no round.started (a log cut short): name the file after the round's first graded fact
        return int(self.first_seen.get((rf.task, rf.round), 0))

    @property
    def resource_gate(self) -> bool:
        if self.started is not None:
            return self.started.resource_gate
        return any(e.resource_gate for e in self.executed.values())


def _opt(msg, name: str):
    return getattr(msg, name) if msg.HasField(name) else None


def _none_if_empty(value: str) -> str | None:
    return value or None


def resources_dict(res: pb.Resources) -> dict[str, int | float]:
    return {k: int_if_integral(getattr(res, k)) for k in RESOURCE_KEYS if res.HasField(k)}


def node_record(
    graded: pb.NodeGraded,
    executed: pb.NodeExecuted | None,
    reward: float | None,
    gate: bool,
    sampled: pb.NodeSampled | None = None,
) -> NodeRecord:
    """One node's record. Without `sampled` the text fields stay empty (the report needs none of them)."""
    cls = GateNodeRecord if gate else NodeRecord
    rec = cls(
        id=graded.node_id,
        step=graded.step,
        round=graded.round,
        exp_id=graded.task,
        parent_id=_opt(graded, "parent_id"),
        sibling_group=graded.sibling_group,
        mode=graded.mode,
    )
    if sampled is not None:
        rec.plan, rec.code = sampled.plan, sampled.code
        rec.raw_completion, rec.thinking = sampled.raw_completion, sampled.thinking
        rec.prompt_messages = [ChatMessage(m.role, m.content) for m in sampled.prompt_messages]
        # slicing a upb repeated field builds the list in C, ~30% faster than list()
        rec.response_token_ids = sampled.response_token_ids[:]
        rec.response_logprobs = sampled.response_logprobs[:]
    if executed is not None:
        rec.exc_type = _opt(executed, "exc_type")
        rec.term_tail = executed.term_tail
    rec.exec_time = graded.exec_time
    rec.is_buggy, rec.status = graded.is_buggy, graded.status
    rec.grade_error = _opt(graded, "grade_error")
    rec.test_metric, rec.oriented = _opt(graded, "test_metric"), _opt(graded, "oriented")
    rec.reward = reward
    rec.source = _none_if_empty(graded.source)
    if gate and executed is not None:
        _fill_gate(rec, executed)
    return rec


def _fill_gate(rec: GateNodeRecord, ex: pb.NodeExecuted) -> None:
    rec.resources = resources_dict(ex.resources) if ex.HasField("resources") else None
    rec.decl_malformed = ex.decl_malformed
    rec.decl_miss_reason = _opt(ex, "decl_miss_reason")
    rec.decl_deps_ignored = ex.decl_deps_ignored
    rec.where = _none_if_empty(ex.where)
    if ex.HasField("exec_timings"):
        rec.exec_timings = {k: getattr(ex.exec_timings, k) for k in EXEC_TIMING_KEYS}
    rec.gpu_util = _opt(ex, "gpu_util")


def timing_line(s: pb.LearnerStepped) -> TimingLine:
    phases = {k: getattr(s.phases_s, k) for k in PHASES if s.phases_s.HasField(k)}
    return TimingLine(step=s.step, total_s=s.total_s, phases_s=phases)
