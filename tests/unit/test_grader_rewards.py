"""Reward shaping (pure functions) and the grader's config."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from treegrpo.config import load
from treegrpo_grader.config import GraderConfig
from treegrpo_grader.rewards import (
    FAILURE_STATUSES,
    Member,
    Shaping,
    group_rewards,
    sigmoid,
    valid_rewards,
)

scores = st.floats(min_value=-50, max_value=50, allow_nan=False)
statuses = st.sampled_from(("ok",) + FAILURE_STATUSES)


@given(st.lists(scores, min_size=1, max_size=32), st.floats(min_value=1e-3, max_value=10))
def test_valid_rewards_lie_in_0_1_and_rise_with_the_score(oriented, tau):
    rewards = valid_rewards(oriented, tau)
    assert all(0 <= r < 1 for r in rewards)
    for a, ra in zip(oriented, rewards, strict=True):
        for b, rb in zip(oriented, rewards, strict=True):
            if a > b:
                assert ra >= rb
            if a == b:
                assert ra == rb


@given(st.lists(st.tuples(statuses, scores), min_size=1, max_size=32))
def test_failed_siblings_get_their_status_penalty_and_valid_ones_a_positive_reward(pairs):
    members = [Member(f"n{i}", s, o if s == "ok" else None) for i, (s, o) in enumerate(pairs)]
    rewards = group_rewards(members, Shaping())
    for m, r in zip(members, rewards, strict=True):
        assert (r == -0.5) if m.status != "ok" else (0 <= r < 1)


def test_failure_penalties_are_per_status():
    shaping = Shaping(penalties={**dict.fromkeys(FAILURE_STATUSES, -0.5), "timeout": -0.2})
    members = [Member("a", "timeout", None), Member("b", "crashed", None), Member("c", "ok", 0.7)]
    assert group_rewards(members, shaping) == [-0.2, -0.5, 0.5]


def test_lone_valid_sibling_gets_one_half_and_ties_are_equal():
    assert valid_rewards([0.9], 0.3) == [0.5]
    assert valid_rewards([-0.6, -0.6, -0.6], 0.3) == [0.5, 0.5, 0.5]


def test_the_seed_group_is_reproduced_in_shape():
    """Best log loss 0.552 -> 0.576 and worst 0.750 -> 0.473 in one archived group of the seed."""
    losses = [0.552, 0.700, 0.720, 0.730, 0.740, 0.750]  # valid-sibling mean 0.699
    rewards = valid_rewards([-x for x in losses], Shaping().temperature)
    assert rewards[0] == max(rewards) and rewards[-1] == min(rewards)
    assert rewards[0] == pytest.approx(0.576, abs=0.005) and rewards[-1] == pytest.approx(0.473, abs=0.005)


def test_rewards_never_reach_one_even_far_above_the_mean():
    assert sigmoid(1e6) < 1 and valid_rewards([1e6, 0.0], 1e-3)[0] < 1
    assert all(math.isfinite(r) for r in valid_rewards([1e300, -1e300], 1e-3))


def test_reward_config_defaults_to_minus_one_half_and_reads_the_environment(monkeypatch):
    cfg = GraderConfig()
    assert cfg.rewards.shaping().penalties == dict.fromkeys(FAILURE_STATUSES, -0.5)
    monkeypatch.setenv("TREEGRPO_GRADER_REWARDS__NO_CODE", "-0.2")
    monkeypatch.setenv("TREEGRPO_GRADER_MLEBENCH_ROOTS", '["/data/mle"]')
    cfg = load(GraderConfig, overrides={"rewards": {"temperature": 0.5}})
    assert cfg.rewards.shaping().penalties["no_code"] == -0.2 and cfg.rewards.temperature == 0.5
    assert cfg.mlebench_roots == ["/data/mle"]


def test_grader_config_rejects_unknown_keys_and_positive_penalties():
    from treegrpo.config import ConfigError

    with pytest.raises(ConfigError, match="nonsense"):
        load(GraderConfig, overrides={"nonsense": 1})
    with pytest.raises(ConfigError, match="crashed"):
        load(GraderConfig, overrides={"rewards": {"crashed": 0.5}})
