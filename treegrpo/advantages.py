"""Group advantage estimators: pure functions of one sibling group's rewards and statuses.

Importable without torch, so the report can recompute the learning-signal share of any archive:

    from treegrpo.advantages import compute, has_signal
    adv = compute("grpo_valid_only", rewards=[0.3, -0.5, 0.7], statuses=["ok", "crashed", "ok"])

Estimators (G = group size, r = rewards):
- ``grpo``: (r_i - mean(r)) / (std(r) + eps) over all siblings (std with Bessel's correction, as verl).
- ``grpo_valid_only`` (DESIGN.md): the same normalisation over the valid (status ``ok``) siblings only;
  every other sibling gets 0. Fewer than two valid siblings, or equal valid rewards: all zeros.
- ``rloo``: r_i - mean of the other siblings' rewards (leave-one-out baseline, no scaling).
- ``dr_grpo``: r_i - mean(r), no std division (Dr. GRPO removes the difficulty bias of the std).

Siblings with status ``infrastructure`` (our side could not execute or grade them) are masked out
for every estimator: advantage 0, and left out of the group's mean, std and baselines, so the group
trains on the rest as if they had never been sampled. With fewer than ``MIN_SIBLINGS`` left the
group is dropped (`dropped_reason` says why): no relative signal remains.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Literal

from treegrpo.events import INFRASTRUCTURE, Status

Estimator = Literal["grpo", "grpo_valid_only", "rloo", "dr_grpo"]
ESTIMATORS: tuple[str, ...] = ("grpo", "grpo_valid_only", "rloo", "dr_grpo")
VALID = Status.OK
EPS = 1e-6
# Rewards that differ by less than this are "equal": no ranking, no signal.
TIE_TOL = 1e-9
MIN_SIBLINGS = 2  # siblings a group needs after masking to be trained on at all


def masked(status: str) -> bool:
    """Left out of its group: the node has no outcome of the policy's (an infrastructure fault)."""
    return status == INFRASTRUCTURE


def dropped_reason(statuses: Sequence[str]) -> str:
    """Why a group cannot be trained on after masking ('' when it can)."""
    lost = sum(masked(s) for s in statuses)
    left = len(statuses) - lost
    if not lost or left >= MIN_SIBLINGS:
        return ""
    return (
        f"{lost} of {len(statuses)} siblings hit infrastructure faults; "
        f"{left} left, fewer than the {MIN_SIBLINGS} a group needs"
    )


def _mean(xs: Sequence[float]) -> float:
    return sum(xs) / len(xs)


def _std(xs: Sequence[float]) -> float:
    m = _mean(xs)
    return math.sqrt(sum((x - m) ** 2 for x in xs) / (len(xs) - 1))


def _all_equal(xs: Sequence[float]) -> bool:
    return max(xs) - min(xs) <= TIE_TOL


def _normalised(xs: Sequence[float], scale: bool) -> list[float]:
    if len(xs) < 2 or _all_equal(xs):
        return [0.0] * len(xs)
    m = _mean(xs)
    if not scale:
        return [x - m for x in xs]
    s = _std(xs)
    return [(x - m) / (s + EPS) for x in xs]


def _rloo(xs: Sequence[float]) -> list[float]:
    n = len(xs)
    if n < 2 or _all_equal(xs):
        return [0.0] * n
    total = sum(xs)
    return [x - (total - x) / (n - 1) for x in xs]


def compute(estimator: str, rewards: Sequence[float], statuses: Sequence[str] | None = None) -> list[float]:
    """Per-sibling advantages of one group, in member order (masked siblings: 0, see above)."""
    if statuses is not None and any(masked(s) for s in statuses):
        if len(statuses) != len(rewards):
            raise ValueError("one status per reward")
        keep = [i for i, s in enumerate(statuses) if not masked(s)]
        out = [0.0] * len(rewards)
        if len(keep) >= MIN_SIBLINGS:
            inner = _compute(estimator, [rewards[i] for i in keep], [statuses[i] for i in keep])
            for i, a in zip(keep, inner, strict=True):
                out[i] = a
        return out
    return _compute(estimator, rewards, statuses)


def _compute(estimator: str, rewards: Sequence[float], statuses: Sequence[str] | None) -> list[float]:
    rewards = [float(r) for r in rewards]
    if any(not math.isfinite(r) for r in rewards):
        raise ValueError(f"non-finite reward in {rewards}")
    if estimator == "grpo":
        return _normalised(rewards, scale=True)
    if estimator == "dr_grpo":
        return _normalised(rewards, scale=False)
    if estimator == "rloo":
        return _rloo(rewards)
    if estimator == "grpo_valid_only":
        if statuses is None or len(statuses) != len(rewards):
            raise ValueError("grpo_valid_only needs one status per reward")
        idx = [i for i, s in enumerate(statuses) if s == VALID]
        out = [0.0] * len(rewards)
        for i, a in zip(idx, _normalised([rewards[i] for i in idx], scale=True), strict=True):
            out[i] = a
        return out
    raise ValueError(f"unknown advantage estimator {estimator!r}; one of {ESTIMATORS}")


def has_signal(estimator: str, rewards: Sequence[float], statuses: Sequence[str] | None = None) -> bool:
    """Whether the group carries a learning signal: some sibling has a non-zero advantage."""
    return any(abs(a) > 0.0 for a in compute(estimator, rewards, statuses))


def signal_share(estimator: str, groups: Sequence[tuple[Sequence[float], Sequence[str]]]) -> float:
    """Share of groups (rewards, statuses) that carry a signal; 0.0 for no groups."""
    if not groups:
        return 0.0
    return sum(has_signal(estimator, r, s) for r, s in groups) / len(groups)
