"""The sampler's side of re-spending (`run.tree.respend`): once a task-round's expansions are all
scored, one `group.respent` decision per zero-variance group (treegrpo/respend.py plans them), and
where each new group comes from: the same expansion again (grow) or another parent (reparent).

The decisions are facts on the log: a restarted sampler folds them back (`_state.py`) and re-plans
only a group the log has no decision for, with what earlier decisions reserved still taken from the
budget, so nothing is re-spent twice. The new groups are then sampled like any expansion
(`policy.respend_expansions`), with their missing siblings only after a crash.
"""

from __future__ import annotations

import logging
import random
import time

from treegrpo import events
from treegrpo.advantages import masked
from treegrpo.bus import Bus
from treegrpo.respend import Grant, Scored, plan_round, respend_step
from treegrpo.v1 import events_pb2 as pb
from treegrpo_sampler._state import RunState
from treegrpo_sampler.policy import RoundState, earlier_scored, positions, softmax_choice

log = logging.getLogger(__name__)


async def record(bus: Bus, state: RunState, rs: RoundState, tokens_per_sibling: int, producer: str) -> int:
    """Publish the round's missing decisions and fold them in; how many were published."""
    evs = decisions(state, rs, tokens_per_sibling, producer)
    if evs:
        await bus.publish_many(evs)
    for e in evs:
        state.apply(e)
        log.info("run %s: %s round %d: %s", state.run_id, rs.task, rs.round, e.group_respent.reason)
    return len(evs)


def decisions(state: RunState, rs: RoundState, tokens_per_sibling: int, producer: str) -> list[pb.Event]:
    """The round's decisions the log does not hold yet ([] until every expansion is scored)."""
    spec = state.spec
    if not spec.tree.respend.enabled or rs.completed:
        return []
    if earlier_scored(rs, spec.tree.expansions) is None:
        return []
    groups = [
        Scored(s, tuple(x.reward for x in g.scores.values()), tuple(x.status for x in g.scores.values()))
        for s in range(spec.tree.expansions)
        if (g := rs.groups[s]).scores is not None
    ]
    recorded = {d.step: d.reserved_tokens for d in rs.respent.values()}
    grants = plan_round(spec.tree.respend, groups, tokens_per_sibling, recorded)
    now = time.time()
    return [
        events.make_event(state.run_id, producer, decision(state, rs, g, tokens_per_sibling), at=now)
        for g in grants
    ]


def decision(state: RunState, rs: RoundState, grant: Grant, tokens_per_sibling: int) -> pb.GroupRespent:
    group = rs.groups[grant.step]
    body = pb.GroupRespent(
        sibling_group=group.group_id,
        task=rs.task,
        round=rs.round,
        step=grant.step,
        why=grant.why,
        reserved_tokens=grant.reserved_tokens,
        budget_left=grant.budget_left,
        tokens_per_sibling=tokens_per_sibling,
        reason=grant.reason,
    )
    if not grant.siblings:
        return body
    mode, parent, child_mode, note = origin(state, rs, grant.step)
    step = respend_step(state.spec.tree.expansions, grant.step)
    body.mode, body.extra_siblings, body.child_mode, body.reason = (
        mode,
        grant.siblings,
        child_mode,
        grant.reason + note,
    )
    body.respend_step, body.respend_group = step, events.group_id(state.run_id, rs.task, rs.round, step)
    if parent is not None:
        body.parent_id = parent
    return body


def origin(state: RunState, rs: RoundState, step: int) -> tuple[str, str | None, str, str]:
    """(mode, parent, the new group's prompt mode, a note): grow keeps the expansion's parent and
    prompt; reparent draws another parent of the round by the tree's softmax over rewards (the
    group's own parent left out), seeded by its place, not the run id, like every tree choice."""
    spec, group = state.spec, rs.groups[step]
    if spec.tree.respend.mode == "reparent":
        scores = {
            nid: sc
            for s in range(spec.tree.expansions)
            for nid, sc in (rs.groups[s].scores or {}).items()
            if not masked(sc.status) and nid != group.parent_id
        }
        if scores:
            where = positions(rs)
            ordered = sorted(scores.items(), key=lambda kv: (where.get(kv[0], (step, 0)), kv[0]))
            rng = random.Random(events.short_hash("respend", spec.seed, rs.task, rs.round, step, n=16))
            parent = softmax_choice([(n, sc.reward) for n, sc in ordered], spec.tree.parent_temperature, rng)
            return "reparent", parent, "debug" if scores[parent].buggy else "improve", f"; parent {parent}"
        return "grow", group.parent_id, group.mode, "; no other parent in the round: grown instead"
    return "grow", group.parent_id, group.mode, ""
