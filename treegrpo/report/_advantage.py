"""Group advantage estimators, as pure functions of one sibling group's rewards (no torch).

The report only asks "does this group carry a learning signal?" (any non-zero advantage). The
learner's own implementation of the same math is the one that trains; this copy keeps the report
importable without the learner's dependencies (deduplicate once both exist).

- `grpo_valid_only` (our reading of the seed): normalise over the valid (status ok) siblings only,
  every other sibling gets 0; fewer than two valid siblings or equal valid rewards: no signal.
- `grpo`: (r - mean) / (std + eps) over all siblings (std with Bessel's correction, as torch.std).
- `dr_grpo`: r - mean over all siblings (Dr. GRPO: no std normalisation).
- `rloo`: r_i - mean of the other siblings.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

ESTIMATORS = ("grpo_valid_only", "grpo", "dr_grpo", "rloo")
EPS = 1e-6
ZERO = 1e-12


def _mean_std(xs: Sequence[float]) -> tuple[float, float]:
    m = sum(xs) / len(xs)
    if len(xs) < 2:
        return m, 0.0
    return m, math.sqrt(sum((x - m) ** 2 for x in xs) / (len(xs) - 1))


def advantages(rewards: Sequence[float], valid: Sequence[bool], estimator: str = "grpo_valid_only") -> list[float]:
    if estimator not in ESTIMATORS:
        raise ValueError(f"unknown estimator {estimator!r}; one of {', '.join(ESTIMATORS)}")
    n = len(rewards)
    if n == 0:
        return []
    if estimator == "grpo_valid_only":
        idx = [i for i in range(n) if valid[i]]
        out = [0.0] * n
        if len(idx) < 2:
            return out
        m, s = _mean_std([rewards[i] for i in idx])
        if s <= ZERO:
            return out
        for i in idx:
            out[i] = (rewards[i] - m) / (s + EPS)
        return out
    m, s = _mean_std(rewards)
    if estimator == "grpo":
        return [0.0] * n if s <= ZERO else [(r - m) / (s + EPS) for r in rewards]
    if estimator == "dr_grpo":
        return [r - m for r in rewards]
    if n < 2:
        return [0.0]
    total = sum(rewards)
    return [r - (total - r) / (n - 1) for r in rewards]


def has_signal(rewards: Sequence[float], valid: Sequence[bool], estimator: str = "grpo_valid_only") -> bool:
    return any(abs(a) > ZERO for a in advantages(rewards, valid, estimator))
