"""A run's trees as the log tells them: a fold over the run's events (replayed or live).

Every fold is idempotent (applying an event twice changes nothing), so a restarted sampler can
replay the log and then keep folding redelivered live events without double counting.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from treegrpo import events
from treegrpo.bus import attempts
from treegrpo.config import RunSpec
from treegrpo.events import Kind
from treegrpo.v1 import events_pb2 as pb
from treegrpo_sampler.policy import GroupState, Respend, RoundState, Score

REPLAY_KINDS = [
    Kind.RUN_STARTED,
    Kind.RUN_COMPLETED,
    Kind.RUN_ENDED,
    Kind.RUN_RESUMED,
    Kind.ROUND_STARTED,
    Kind.ROUND_COMPLETED,
    Kind.NODE_SAMPLED,
    Kind.GROUP_SCORED,
    Kind.POLICY_PUBLISHED,
    Kind.GROUP_RESPENT,
]


@dataclass(frozen=True)
class NodeRecord:
    """What later prompts need of a sampled node."""

    node_id: str
    task: str
    round: int
    step: int
    code: str


@dataclass
class RunState:
    run_id: str
    spec: RunSpec
    rounds: dict[tuple[str, int], RoundState] = field(default_factory=dict)
    nodes: dict[str, NodeRecord] = field(default_factory=dict)
    published: dict[int, pb.PolicyPublished] = field(default_factory=dict)
    completed: bool = False  # run.completed seen, or the run's latest attempt ended: stop sampling it
    finished: bool = False  # run.completed seen: the run is over for good
    ended: set[int] = field(default_factory=set)  # attempts recorded by run.ended
    resumed: set[int] = field(default_factory=set)  # attempts opened by run.resumed

    def round(self, task: str, round_: int) -> RoundState:
        key = (task, round_)
        if key not in self.rounds:
            self.rounds[key] = RoundState(task, round_)
        return self.rounds[key]

    def group(self, task: str, round_: int, step: int) -> GroupState:
        rs = self.round(task, round_)
        if step not in rs.groups:
            rs.groups[step] = GroupState(step, events.group_id(self.run_id, task, round_, step))
        return rs.groups[step]

    def latest_published(self) -> pb.PolicyPublished | None:
        return self.published[max(self.published)] if self.published else None

    def all_rounds_complete(self) -> bool:
        return all(
            self.round(t, r).completed for t in self.spec.tasks for r in range(1, self.spec.rounds + 1)
        )

    # ---- the fold ---------------------------------------------------------------------------
    def apply(self, event: pb.Event) -> None:
        field_name = event.WhichOneof("body")
        fold = getattr(self, f"_on_{field_name}", None)
        if fold is not None:
            fold(getattr(event, field_name))

    def _on_run_completed(self, body: pb.RunCompleted) -> None:
        self.finished = self.completed = True

    def _on_run_ended(self, body: pb.RunEnded) -> None:
        self.ended.add(body.attempt)
        self._reopen_or_close()

    def _on_run_resumed(self, body: pb.RunResumed) -> None:
        self.resumed.add(body.attempt)
        self._reopen_or_close()

    def _reopen_or_close(self) -> None:
        """Open while fewer attempts ended than were started (1 + resumes); sets, so idempotent."""
        attempt, ended = attempts(self.ended, self.resumed)
        self.completed = self.finished or ended >= attempt

    def _on_round_started(self, body: pb.RoundStarted) -> None:
        rs = self.round(body.task, body.round)
        if rs.started_unix is None:
            rs.started_unix, rs.policy_version = body.started_unix, body.policy_version

    def _on_round_completed(self, body: pb.RoundCompleted) -> None:
        self.round(body.task, body.round).completed = True

    def _on_node_sampled(self, body: pb.NodeSampled) -> None:
        g = self.group(body.task, body.round, body.step)
        g.mode, g.parent_id = body.mode, (body.parent_id if body.HasField("parent_id") else None)
        g.sampled[body.index_in_group] = body.node_id
        self.nodes[body.node_id] = NodeRecord(body.node_id, body.task, body.round, body.step, body.code)

    def _on_group_scored(self, body: pb.GroupScored) -> None:
        g = self.group(body.task, body.round, body.step)
        g.scores = {m.node_id: Score(m.reward, m.status) for m in body.members}

    def _on_group_respent(self, body: pb.GroupRespent) -> None:
        parent = body.parent_id if body.HasField("parent_id") else None
        self.round(body.task, body.round).respent[body.step] = Respend(
            body.step, body.respend_step, body.extra_siblings, body.child_mode, parent, body.reserved_tokens
        )

    def _on_policy_published(self, body: pb.PolicyPublished) -> None:
        copy = pb.PolicyPublished()
        copy.CopyFrom(body)
        self.published[body.version] = copy
