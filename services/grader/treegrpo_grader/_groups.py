"""Sibling groups: which nodes form one, when it is complete, and its `group.scored` fact.

State is a cache of the log, never the truth: the members of a group are looked up on the stream
(`bus.last_events(run, Kind.NODE_GRADED, sibling_ids)`, one request) whenever the cache lacks
them, so a restarted grader, a second replica, or siblings graded in any order all reach the same
answer, and the deterministic event id of `group.scored` makes its publication exactly-once.

A group whose node ids are not the contract's (`events.node_id`; an imported run's) cannot be
looked up by id: its siblings are found by group in an index of the run's `node.graded` facts,
read on from the stream sequence it was last read to, so each fact is read once: O(N) for a run
of N nodes (it was one whole replay per node, O(N²)).

A member masked `infrastructure` may have been retried (`treegrpo run --resume --retry-masked`):
before a group with masked members is scored, their newest attempts are looked up (one batched
request when none was retried, `treegrpo.retries`); a retry not yet graded keeps the group open, and
its grading completes it with the retried outcome. A group is scored once: a retry graded after its
group was scored is recorded (the node's history) but changes no score (the runner retries only
nodes of groups not yet scored, so this happens only when a straggler scored it meanwhile).
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field

from treegrpo import events
from treegrpo.bus import Bus
from treegrpo.events import INFRASTRUCTURE, Kind
from treegrpo.retries import newest_attempts
from treegrpo.v1 import events_pb2 as pb
from treegrpo_grader.rewards import Member, Shaping, group_rewards


def sibling_ids(run_id: str, graded: pb.NodeGraded) -> list[str]:
    """The contract's node ids of the group, in index order."""
    return [
        events.node_id(run_id, graded.task, graded.round, graded.step, i) for i in range(graded.group_size)
    ]


def build_group_scored(
    graded: pb.NodeGraded, members: list[pb.NodeGraded], shaping: Shaping
) -> pb.GroupScored:
    typed = [Member(m.node_id, m.status, m.oriented if m.HasField("oriented") else None) for m in members]
    rewards = group_rewards(typed, shaping)
    body = pb.GroupScored(
        sibling_group=graded.sibling_group, task=graded.task, round=graded.round, step=graded.step
    )
    for member, reward in zip(typed, rewards, strict=True):
        gm = body.members.add(node_id=member.node_id, reward=reward, status=member.status)
        if member.oriented is not None:
            gm.oriented = member.oriented
    return body


def _attempt(graded: pb.NodeGraded) -> int:
    return max(graded.attempt, 1)


MAX_INDEXED_RUNS = 8  # runs whose node.graded index is kept (the least recently used goes first)


@dataclass
class _RunIndex:
    """A run's node.graded facts by group, read up to stream sequence `seq`."""

    seq: int = 0
    groups: dict[str, dict[str, pb.NodeGraded]] = field(default_factory=dict)


class GroupTracker:
    """Remembers graded siblings of open groups and which groups are already scored (bounded)."""

    def __init__(self, bus: Bus, shaping: Shaping, max_scored: int = 100_000):
        self.bus, self.shaping, self.max_scored = bus, shaping, max_scored
        self._open: dict[tuple[str, str], dict[str, pb.NodeGraded]] = {}
        self._scored: OrderedDict[tuple[str, str], None] = OrderedDict()
        self._indexes: OrderedDict[str, _RunIndex] = OrderedDict()  # runs with ids not the contract's
        self.lookups = 0  # stream lookups made (a restart-recovery test reads this)

    async def on_graded(self, run_id: str, graded: pb.NodeGraded) -> pb.GroupScored | None:
        """Record one graded sibling; return the group's fact if the group is now complete."""
        key = (run_id, graded.sibling_group)
        if key in self._scored:
            return None
        members = self._open.setdefault(key, {})
        old = members.get(graded.node_id)
        if old is None or _attempt(graded) >= _attempt(old):  # a redelivered older attempt stays old
            members[graded.node_id] = graded
        ordered = await self._complete_members(run_id, graded, members)
        if ordered is None:
            return None
        return build_group_scored(graded, ordered, self.shaping)

    def mark_scored(self, run_id: str, sibling_group: str) -> None:
        key = (run_id, sibling_group)
        self._open.pop(key, None)
        if run_id in self._indexes:
            self._indexes[run_id].groups.pop(sibling_group, None)
        self._scored[key] = None
        while len(self._scored) > self.max_scored:
            self._scored.popitem(last=False)

    async def already_scored(self, run_id: str, sibling_group: str) -> bool:
        self.lookups += 1
        return await self.bus.last_event(run_id, Kind.GROUP_SCORED, sibling_group) is not None

    async def _complete_members(
        self, run_id: str, graded: pb.NodeGraded, members: dict[str, pb.NodeGraded]
    ) -> list[pb.NodeGraded] | None:
        ids = sibling_ids(run_id, graded)
        if graded.node_id not in ids:  # ids not from events.node_id (e.g. imported): scan the run
            return await self._members_by_replay(run_id, graded, members)
        missing = [nid for nid in ids if nid not in members]
        if missing:  # the siblings memory lacks, in one request
            self.lookups += 1
            found = await self.bus.last_events(run_id, Kind.NODE_GRADED, missing)
            members.update({nid: e.node_graded for nid, e in found.items()})
        if any(nid not in members for nid in ids):
            return None  # a sibling is still out; its own grading will complete the group
        if not await self._newest(run_id, members):
            return None  # a masked sibling's retry is still out; its grading will complete the group
        return [members[nid] for nid in ids]

    async def _newest(self, run_id: str, members: dict[str, pb.NodeGraded]) -> bool:
        """Replace masked members by their newest attempt's graded fact; False while one's retry is
        not graded yet. Costs nothing for a group without masked members."""
        masked = {nid: _attempt(m) for nid, m in members.items() if m.status == INFRASTRUCTURE}
        if not masked:
            return True
        self.lookups += 1
        newest = await newest_attempts(self.bus, run_id, masked)
        newer = [(nid, str(a)) for nid, a in newest.items() if a > masked[nid]]
        if not newer:
            return True
        self.lookups += 1
        found = await self.bus.last_events(run_id, Kind.NODE_GRADED, newer)
        for e in found.values():
            members[e.node_graded.node_id] = e.node_graded
        return len(found) == len(newer)

    async def _members_by_replay(
        self, run_id: str, graded: pb.NodeGraded, members: dict[str, pb.NodeGraded]
    ) -> list[pb.NodeGraded] | None:
        if len(members) < graded.group_size:
            index = await self._index(run_id)
            for g in index.groups.get(graded.sibling_group, {}).values():
                members.setdefault(g.node_id, g)
        if len(members) < graded.group_size:
            return None
        return sorted(members.values(), key=lambda m: m.node_id)

    async def _index(self, run_id: str) -> _RunIndex:
        """The run's index, read on to the stream's end from where it was last read."""
        index = self._indexes.pop(run_id, None) or _RunIndex()
        self._indexes[run_id] = index
        while len(self._indexes) > MAX_INDEXED_RUNS:
            self._indexes.popitem(last=False)
        async for seq, event in self.bus.replay(run_id, kinds=[Kind.NODE_GRADED], after=index.seq):
            g = event.node_graded
            if (run_id, g.sibling_group) not in self._scored:
                index.groups.setdefault(g.sibling_group, {})[g.node_id] = g
            index.seq = seq
        return index
