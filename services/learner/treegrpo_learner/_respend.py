"""The learner's side of re-spending (`run.tree.respend`, treegrpo/respend.py): which groups its
round's step still waits for, and groups without signal left out of the step (counted).

With re-spending on, a zero-variance group of the round's own expansions may be followed by a
re-spent group (its new siblings, at step `expansions + step`). The sampler decides that once the
task-round is scored and records it (`group.respent`, keyed by the group); the learner looks the
decision up and, until it is on the log, defers the group (`Deferred`: handed back and redelivered,
never dead-lettered). So a sync step knows the whole round before it takes it: every expansion plus
every re-spent group granted siblings. Off (the default), nothing here acts: no lookup, no skip.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from treegrpo.bus import Bus, Deferred
from treegrpo.config import RunSpec
from treegrpo.events import Kind
from treegrpo.respend import no_variance
from treegrpo.v1 import events_pb2 as pb

SKIPPED = "groups_skipped_no_signal"  # the step's metric: groups that trained nothing for want of signal
DECISION_POLL_S = 3.0  # how soon a group waiting for its decision comes back (the round's end: minutes)


@dataclass(frozen=True)
class Arrival:
    """What a scored group tells the sync rule about its round (`_buffer.GroupBuffer.take`)."""

    extra: bool = False  # a re-spent group: rides in its round's step beyond the round's expansions
    expects: int = 0  # re-spent groups that follow this one (0 or 1)


async def arrival(bus: Bus, run_id: str, spec: RunSpec, gs: pb.GroupScored) -> Arrival:
    """Raises Deferred while a zero-variance group's decision is not on the log yet."""
    if not spec.tree.respend.enabled:
        return Arrival()
    if gs.step >= spec.tree.expansions:
        return Arrival(extra=True)
    if not no_variance([m.reward for m in gs.members], [m.status for m in gs.members]):
        return Arrival()
    fact = await bus.last_event(run_id, Kind.GROUP_RESPENT, gs.sibling_group)
    if fact is None:
        raise Deferred(
            f"group {gs.sibling_group} has no reward variance: waiting for the sampler's re-spend decision",
            DECISION_POLL_S,
        )
    return Arrival(expects=1 if fact.group_respent.extra_siblings else 0)


def counters(spec: RunSpec) -> dict[str, float]:
    """The step's counters this module keeps (shown as 0 when nothing was skipped: never silent)."""
    return {SKIPPED: 0.0} if spec.tree.respend.enabled else {}


def skips(spec: RunSpec, advantages: Sequence[float]) -> bool:
    """With re-spending on, a group whose advantages are all 0 trains nothing: its sequences leave
    the step's token-mean denominator too (DAPO's dynamic sampling; verl `filter_groups`), instead of
    diluting the groups that carry signal. It still rides in the step, so it is acknowledged once."""
    return spec.tree.respend.enabled and not any(a != 0.0 for a in advantages)
