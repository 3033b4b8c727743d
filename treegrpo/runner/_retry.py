"""`--resume --retry-masked`: run again the nodes that infrastructure faults masked, where that can
still change what the run scores.

A node masked `infrastructure` (the executor could not run it, or the grader could not grade it,
after their retries) has no outcome of the policy's. Once the cause is fixed, the resumed run may
run it again: the runner records `node.retried` (keyed (node, attempt), attempt = the node's
attempts so far + 1) before the services start; the executor runs it as that attempt and the
grader grades it, each fact keyed by the attempt (`events.attempt_key`), the masked ones kept.

Which nodes: only those whose sibling group is not yet scored. A scored group may have been
trained already, or be trained at any moment (the learner takes `group.scored` as it comes);
scoring it again would train one group twice or leave a trained score the log contradicts, so its
masked members stay masked (`kept`, counted). A group that is not scored is scored once, by the
grader, when every member's newest attempt is graded (`treegrpo_grader._groups`): the retried
outcome is the one it scores. A node whose retry was asked but not yet graded (a resume cut short)
is `pending`: its retry is still on the executor's queue and is not asked again.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from treegrpo import events
from treegrpo.bus import Bus
from treegrpo.events import INFRASTRUCTURE, Kind
from treegrpo.v1 import events_pb2 as pb

KINDS = (Kind.NODE_GRADED, Kind.GROUP_SCORED, Kind.NODE_RETRIED)  # what the plan reads


@dataclass
class Attempts:
    """What the log says of a run's attempts at its nodes (from node.graded, group.scored, node.retried)."""

    graded: dict[str, pb.NodeGraded] = field(default_factory=dict)  # node -> its newest graded attempt
    asked: dict[str, int] = field(default_factory=dict)  # node -> its newest retry's attempt
    scored: set[str] = field(default_factory=set)  # sibling groups scored

    def add(self, event: pb.Event) -> None:
        kind = event.WhichOneof("body")
        if kind == "node_graded":
            g = event.node_graded
            old = self.graded.get(g.node_id)
            if old is None or max(g.attempt, 1) >= max(old.attempt, 1):
                self.graded[g.node_id] = g
        elif kind == "group_scored":
            self.scored.add(event.group_scored.sibling_group)
        elif kind == "node_retried":
            r = event.node_retried
            self.asked[r.node_id] = max(self.asked.get(r.node_id, 1), r.attempt)


@dataclass
class RetryPlan:
    retry: list[pb.NodeRetried] = field(default_factory=list)  # asked now
    pending: list[str] = field(default_factory=list)  # asked by an earlier resume, not yet graded
    kept: list[str] = field(default_factory=list)  # masked, in a group already scored: stay masked

    def line(self) -> str:
        """The plan in words, for the screen."""
        text = f"retrying {len(self.retry)} node(s) masked by infrastructure faults"
        if self.pending:
            text += f", {len(self.pending)} retry(ies) still pending"
        if self.kept:
            text += f"; {len(self.kept)} stay masked (their group is already scored)"
        return text


def plan(run_id: str, seen: Attempts, run_attempt: int) -> RetryPlan:
    """Which masked nodes to run again (pure: the log's facts in, the facts to publish out)."""
    out = RetryPlan()
    for nid in sorted(set(seen.graded) | set(seen.asked)):
        asked, g = seen.asked.get(nid, 1), seen.graded.get(nid)
        if g is None or max(g.attempt, 1) < asked:
            if asked > 1:
                out.pending.append(nid)
            continue
        if g.status != INFRASTRUCTURE:
            continue
        index = _index(run_id, g)
        if g.sibling_group in seen.scored or index is None:  # scored, or ids not ours (imported)
            out.kept.append(nid)
            continue
        out.retry.append(
            pb.NodeRetried(
                node_id=nid,
                task=g.task,
                round=g.round,
                step=g.step,
                sibling_group=g.sibling_group,
                group_size=g.group_size,
                index_in_group=index,
                attempt=asked + 1,
                run_attempt=run_attempt,
                reason=g.grade_error[:500] if g.HasField("grade_error") else "",
            )
        )
    return out


def _index(run_id: str, g: pb.NodeGraded) -> int | None:
    """The node's index in its group, from the contract's ids; None when they are not its."""
    for i in range(g.group_size):
        if events.node_id(run_id, g.task, g.round, g.step, i) == g.node_id:
            return i
    return None


async def retry_masked(bus: Bus, run_id: str, run_attempt: int) -> RetryPlan:
    """Read the run's attempts, plan, and record each retry (deterministic ids: a re-plan from the
    same log asks the same, and the server drops a republish)."""
    seen = Attempts()
    async for _, event in bus.replay(run_id, kinds=KINDS):
        seen.add(event)
    found = plan(run_id, seen, run_attempt)
    if found.retry:
        await bus.publish_many([events.make_event(run_id, "runner", body) for body in found.retry])
    return found
