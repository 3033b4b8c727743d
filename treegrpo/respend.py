"""Zero-variance sibling groups re-spent by the search: which groups, how many new siblings each,
within the round's token budget (`run.tree.respend`, docs/SAMPLER.md "Re-spending").

Pure functions, shared by the sampler (it plans and records each decision as `group.respent`), the
learner (a zero-variance group makes it wait for that decision, so it knows which groups its
round's step still needs) and the report. Planned once per task-round, when every expansion of it
is scored, in step order: the same scores give the same plan whatever order they arrived in, so a
train arm and its no-train control re-spend their common round 1 alike, and a restarted sampler
re-plans exactly what it had planned.

The budget is kept by reservation: a new sibling takes `tokens_per_sibling` (the sampler's
`max_new_tokens`, the most one completion can generate) from the round's budget before it is
sampled, so the tokens generated can never exceed it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from treegrpo.advantages import MIN_SIBLINGS, TIE_TOL, masked
from treegrpo.config import RespendSettings
from treegrpo.events import Status

ALL_FAILED, ALL_EQUAL, TOO_FEW = "all_failed", "all_equal", "too_few_siblings"


def no_variance(rewards: Sequence[float], statuses: Sequence[str]) -> str:
    """Why a scored group's rewards carry nothing to compare ('' when they vary). Siblings our side
    failed (status `infrastructure`) are left out, as every advantage estimator leaves them out."""
    kept = [(r, s) for r, s in zip(rewards, statuses, strict=True) if not masked(s)]
    if len(kept) < MIN_SIBLINGS:
        return TOO_FEW
    values = [r for r, _ in kept]
    if max(values) - min(values) > TIE_TOL:
        return ""
    return ALL_FAILED if all(s != Status.OK for _, s in kept) else ALL_EQUAL


@dataclass(frozen=True)
class Scored:
    """One scored expansion of the round, as the plan needs it."""

    step: int
    rewards: tuple[float, ...]
    statuses: tuple[str, ...]


@dataclass(frozen=True)
class Grant:
    """The plan for one zero-variance group: `siblings` new ones (0: none), and what is left."""

    step: int
    why: str
    siblings: int
    reserved_tokens: int
    budget_left: int
    reason: str


def respend_step(expansions: int, step: int) -> int:
    """The step of the group re-spent for expansion `step`: past the tree's own (ids follow from it)."""
    return expansions + step


def round_steps(expansions: int, respend_enabled: bool) -> int:
    """How many steps a task-round may hold: its expansions, and with re-spending on as many again
    (a re-spent group's step is `respend_step`); a node at a later step is not of the run."""
    return expansions * (2 if respend_enabled else 1)


def plan_round(
    settings: RespendSettings,
    groups: Sequence[Scored],
    tokens_per_sibling: int,
    recorded: Mapping[int, int] | None = None,
) -> list[Grant]:
    """A grant for every zero-variance group of `groups` (the round's expansions, all scored) not
    in `recorded` (step -> tokens an earlier decision reserved, kept as it was: a re-plan after a
    restart leaves the log's decisions alone and never spends their reservation twice)."""
    recorded = recorded or {}
    left = max(0, settings.round_token_budget - sum(recorded.values()))
    out = []
    for g in sorted(groups, key=lambda g: g.step):
        why = no_variance(g.rewards, g.statuses)
        if not why or g.step in recorded:
            continue
        afford = left // tokens_per_sibling if tokens_per_sibling > 0 else 0
        k = min(settings.max_extra_siblings, afford)
        if k < settings.min_extra_siblings:
            reason = (
                f"nothing re-spent: {left} tokens left of {settings.round_token_budget} buy {afford} "
                f"sibling(s) of {tokens_per_sibling}, fewer than {settings.min_extra_siblings}"
            )
            out.append(Grant(g.step, why, 0, 0, left, reason))
            continue
        left -= k * tokens_per_sibling
        reason = f"{why}: {k} new sibling(s), {k * tokens_per_sibling} tokens reserved, {left} left"
        out.append(Grant(g.step, why, k, k * tokens_per_sibling, left, reason))
    return out
