"""Reward shaping: what each sibling of a group is worth to the learner. Pure functions.

    failed sibling (status != ok):  reward = penalty[status]           (default -0.5 each; -0.2 available)
    masked sibling (infrastructure): reward = 0, no penalty: our side failed it (treegrpo/fault_policy.py)
    valid sibling:                  reward = σ((o_i − ō) / τ)           in (0, 1)

where o_i is the sibling's oriented score (higher is better), ō the mean oriented score of the
group's valid siblings, τ the temperature (`reward_temperature`, in oriented-metric units) and σ the
logistic function. A lone valid sibling gets σ(0) = 0.5. The reward rises with the score relative to
the valid siblings; τ sets how steeply. Our reading of the seed: one archived group's best sibling
(log loss 0.552) got 0.576 (logit +0.306) and its worst (0.750) got 0.473 (logit −0.108); both
points fit this formula exactly with τ ≈ 0.48 and a valid-sibling mean log loss of 0.698, so the
default is τ = 0.5.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from treegrpo.events import FAILURE_STATUSES, INFRASTRUCTURE, Status

DEFAULT_PENALTY = -0.5
ALTERNATIVE_PENALTY = -0.2  # the seed's other fixed penalty (71 of 2309 failed nodes)
_Z_MAX = 30.0  # σ(30) < 1 in float64, so a valid reward never reaches 1


@dataclass(frozen=True)
class Shaping:
    penalties: Mapping[str, float] = field(
        default_factory=lambda: dict.fromkeys((s.value for s in FAILURE_STATUSES), DEFAULT_PENALTY)
    )
    temperature: float = 0.5
    unknown_status_penalty: float = DEFAULT_PENALTY


@dataclass(frozen=True)
class Member:
    node_id: str
    status: str
    oriented: float | None


def failure_penalty(status: str, shaping: Shaping) -> float:
    return float(shaping.penalties.get(status, shaping.unknown_status_penalty))


def sigmoid(z: float) -> float:
    z = max(-_Z_MAX, min(_Z_MAX, z))
    return 1.0 / (1.0 + math.exp(-z))


def valid_rewards(oriented: Sequence[float], temperature: float) -> list[float]:
    """σ((o − mean) / τ) for each valid sibling's oriented score."""
    if temperature <= 0:
        raise ValueError("temperature must be positive")
    if not oriented:
        return []
    mean = math.fsum(oriented) / len(oriented)
    return [sigmoid((o - mean) / temperature) for o in oriented]


def is_valid(member: Member) -> bool:
    return member.status == Status.OK and member.oriented is not None and math.isfinite(member.oriented)


def group_rewards(members: Sequence[Member], shaping: Shaping) -> list[float]:
    """Rewards in the members' order. Deterministic: the same members give the same floats."""
    valid = [m.oriented for m in members if is_valid(m)]
    shaped = iter(valid_rewards(valid, shaping.temperature))  # type: ignore[arg-type]
    return [
        next(shaped)
        if is_valid(m)
        else 0.0
        if m.status == INFRASTRUCTURE
        else failure_penalty(m.status, shaping)
        for m in members
    ]
