"""The group buffer: scored sibling groups waiting for a step, and the rule that picks a batch.

A group enters with its members' training data (their `node.sampled` and `tokens.recorded` facts)
and a future the consumer's handler awaits: the group.scored message is acknowledged only once the
step that used the group is durable (or the group was dropped as stale), so a crash redelivers it.
The members are read in one go (`read_members`: one batched direct get for the whole group, both kinds).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass, field

from opentelemetry.trace import SpanContext

from treegrpo import advantages, events
from treegrpo.bus import Bus, TransientError
from treegrpo.events import INFRASTRUCTURE, Kind
from treegrpo.v1 import events_pb2 as pb

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Member:
    node_id: str
    reward: float
    status: str
    prompt_ids: tuple[int, ...]
    response_ids: tuple[int, ...]
    behaviour_logprobs: tuple[float, ...]
    policy_version: int
    truncated: bool = False  # the sampler cut it at max_new_tokens (finish_reason "length")


async def read_members(bus: Bus, run_id: str, gs: pb.GroupScored) -> list[Member]:
    """The group's members with their training data, in the group's order, from one batched read of
    their `node.sampled` facts and their `tokens.recorded` (runs recorded before the payload had a
    fact of its own, and imported runs, carry it in `node.sampled`: `events.tokens_of`);
    `TransientError` while one of them is not on the stream yet. A member whose payload is another
    sampling's (`events.foreign_tokens`) is masked: no outcome of the policy's to train on."""
    ids = [m.node_id for m in gs.members]
    wanted = [(Kind.NODE_SAMPLED, i) for i in ids] + [(Kind.TOKENS_RECORDED, i) for i in ids]
    found = await bus.last_facts(run_id, wanted)
    out = []
    for m in gs.members:
        event = found.get((Kind.NODE_SAMPLED, m.node_id))
        if event is None:
            raise TransientError(f"node.sampled of {m.node_id} not on the stream yet", 2.0)
        ns = event.node_sampled
        recorded = found.get((Kind.TOKENS_RECORDED, m.node_id))
        tokens = events.tokens_of(ns, recorded.tokens_recorded if recorded is not None else None)
        if tokens is None and recorded is None:
            raise TransientError(f"tokens.recorded of {m.node_id} not on the stream yet", 2.0)
        if tokens is None:  # a payload of another sampling of the node: never trained on
            log.warning(
                "group %s: %s; the node is masked",
                gs.sibling_group,
                events.foreign_tokens(ns, recorded.tokens_recorded),
            )
            out.append(Member(m.node_id, m.reward, INFRASTRUCTURE, (), (), (), int(ns.policy_version)))
            continue
        out.append(
            Member(
                m.node_id,
                m.reward,
                m.status,
                tuple(tokens.prompt_token_ids),
                tuple(tokens.response_token_ids),
                tuple(tokens.response_logprobs),
                int(ns.policy_version),
                ns.finish_reason == "length",
            )
        )
    return out


@dataclass
class PendingGroup:
    group: str
    task: str
    round: int
    step: int
    stream_seq: int
    members: list[Member]
    done: asyncio.Future
    span: SpanContext | None = None
    extra: bool = False  # a re-spent group (run.tree.respend): beyond its round's `need` in sync mode
    expects: int = 0  # re-spent groups that will follow this one (its round waits for them)

    @property
    def policy_version(self) -> int:
        """The oldest version that sampled any member (staleness is counted from it)."""
        return min((m.policy_version for m in self.members), default=0)

    def advantages(self, estimator: str, penalty: Callable[[int], float] | None = None) -> list[float]:
        """Per member; 0 for members masked by infrastructure faults (treegrpo/advantages.py).
        `penalty(response length)` is added to each reward first (DAPO's soft overlong punishment)."""
        rewards = [m.reward + (penalty(len(m.response_ids)) if penalty else 0.0) for m in self.members]
        return advantages.compute(estimator, rewards, [m.status for m in self.members])

    @property
    def dropped(self) -> str:
        """Why the group trains nothing ('' when it trains): too few siblings left after masking.
        A dropped group still rides in its round's step, so the round completes and it is acked."""
        return advantages.dropped_reason([m.status for m in self.members])


@dataclass
class Batch:
    groups: list[PendingGroup]
    stale: list[PendingGroup] = field(default_factory=list)


class GroupBuffer:
    def __init__(self) -> None:
        self._groups: dict[str, PendingGroup] = {}
        self.changed = asyncio.Event()

    def __len__(self) -> int:
        return len(self._groups)

    def __contains__(self, group: str) -> bool:
        return group in self._groups

    def add(self, g: PendingGroup) -> PendingGroup:
        """Keep the first copy of a group (a redelivery while it waits shares its future)."""
        kept = self._groups.setdefault(g.group, g)
        self.changed.set()
        return kept

    def take(
        self,
        need: int,
        version: int,
        max_staleness: int,
        sync: bool,
        consumed: Callable[[int], int] = lambda _round: 0,
    ) -> Batch | None:
        """The next batch, oldest first; stale groups are removed and returned to be dropped.

        sync: the groups of the oldest round present once the round is whole (one step per round
        across tasks); groups of it already consumed (`consumed(round)`, e.g. dropped as stale)
        will never come again, so they count towards `need` instead of stalling the run.
        async: the `need` oldest groups in stream order."""
        stale = [g for g in self._groups.values() if version - g.policy_version > max_staleness]
        for g in stale:
            del self._groups[g.group]
        order = sorted(self._groups.values(), key=lambda g: (g.round, g.stream_seq) if sync else g.stream_seq)
        if sync and order:
            order = [g for g in order if g.round == order[0].round]
            need = max(1, need - consumed(order[0].round))
            chosen = _whole_round(order, need)
        else:
            chosen = order[:need] if len(order) >= need else None
        if chosen is None:
            return Batch([], stale) if stale else None
        for g in chosen:
            del self._groups[g.group]
        return Batch(chosen, stale)

    def fail_all(self, exc: BaseException) -> None:
        for g in self._groups.values():
            if not g.done.done():
                g.done.set_exception(exc)
        self._groups.clear()


def _whole_round(order: list[PendingGroup], need: int) -> list[PendingGroup] | None:
    """A sync round's groups once it is whole: `need` of its own expansions, and every re-spent
    group those announced (`expects`); None while any is missing."""
    base = [g for g in order if not g.extra]
    extras = [g for g in order if g.extra]
    if len(base) < need or len(extras) < sum(g.expects for g in base[:need]):
        return None
    return base[:need] + extras
