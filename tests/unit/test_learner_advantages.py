"""Advantage estimators: pure functions, no torch."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from treegrpo.advantages import compute, has_signal, signal_share


def test_grpo_valid_only_gives_zero_advantage_to_invalid_siblings():
    adv = compute("grpo_valid_only", [0.9, -0.5, 0.3, -0.2, 0.6], ["ok", "crashed", "ok", "timeout", "ok"])
    assert adv[1] == 0.0 and adv[3] == 0.0
    valid = [adv[0], adv[2], adv[4]]
    assert abs(sum(valid)) < 1e-9
    assert valid[0] > valid[2] > valid[1]
    mean = (0.9 + 0.3 + 0.6) / 3
    std = math.sqrt(((0.9 - mean) ** 2 + (0.3 - mean) ** 2 + (0.6 - mean) ** 2) / 2)
    assert adv[0] == pytest.approx((0.9 - mean) / (std + 1e-6))


@pytest.mark.parametrize("statuses", [["crashed"] * 4, ["ok", "crashed", "timeout", "no_code"]])
def test_grpo_valid_only_group_with_fewer_than_two_valid_carries_no_signal(statuses):
    rewards = [0.7, -0.5, -0.5, -0.2]
    assert compute("grpo_valid_only", rewards, statuses) == [0.0] * 4
    assert not has_signal("grpo_valid_only", rewards, statuses)


def test_equal_valid_rewards_carry_no_signal_but_plain_grpo_still_ranks_failures():
    rewards, statuses = [0.4, 0.4, -0.5, -0.5], ["ok", "ok", "crashed", "crashed"]
    assert not has_signal("grpo_valid_only", rewards, statuses)
    assert has_signal("grpo", rewards, statuses)


def test_rloo_uses_the_mean_of_the_other_siblings():
    assert compute("rloo", [1.0, 0.0, 0.0, 0.0]) == pytest.approx([1.0, -1 / 3, -1 / 3, -1 / 3])


def test_dr_grpo_centres_without_scaling():
    assert compute("dr_grpo", [2.0, 0.0]) == pytest.approx([1.0, -1.0])


def test_signal_share_counts_groups_with_a_nonzero_advantage():
    groups = [([0.1, 0.9], ["ok", "ok"]), ([-0.5, -0.5], ["crashed", "crashed"]), ([0.2, 0.2], ["ok", "ok"])]
    assert signal_share("grpo_valid_only", groups) == pytest.approx(1 / 3)


def test_unknown_estimator_and_nonfinite_reward_are_refused():
    with pytest.raises(ValueError):
        compute("ppo", [1.0, 0.0])
    with pytest.raises(ValueError):
        compute("grpo", [float("nan"), 0.0])


@given(st.lists(st.floats(-10, 10), min_size=2, max_size=16), st.sampled_from(["grpo", "rloo", "dr_grpo"]))
def test_advantages_sum_to_zero_and_keep_the_reward_order(rewards, estimator):
    adv = compute(estimator, rewards)
    assert abs(sum(adv)) < 1e-6 * max(1.0, len(rewards))
    for i in range(len(rewards)):
        for j in range(len(rewards)):
            if rewards[i] > rewards[j] + 1e-6:
                assert adv[i] >= adv[j]


@pytest.mark.parametrize("estimator", ["grpo", "rloo", "dr_grpo"])
def test_siblings_masked_by_infrastructure_faults_are_left_out_of_every_estimator(estimator):
    """A masked sibling (reward 0, status infrastructure) gets no advantage and moves no baseline:
    the group's advantages are those of the group without it (grpo_valid_only already left every
    non-ok sibling out)."""
    rewards, statuses = [0.7, -0.5, 0.0, 0.2], ["ok", "crashed", "infrastructure", "ok"]
    adv = compute(estimator, rewards, statuses)
    rest = compute(estimator, [0.7, -0.5, 0.2], ["ok", "crashed", "ok"])
    assert adv == [rest[0], rest[1], 0.0, rest[2]]


def test_a_group_left_with_fewer_than_two_siblings_is_dropped_with_a_reason():
    from treegrpo.advantages import dropped_reason

    assert dropped_reason(["ok", "infrastructure", "crashed"]) == ""
    assert dropped_reason(["ok", "crashed"]) == ""
    why = dropped_reason(["ok", "infrastructure", "infrastructure"])
    assert why == "2 of 3 siblings hit infrastructure faults; 1 left, fewer than the 2 a group needs"
    assert compute("grpo", [0.9, 0.0, 0.0], ["ok", "infrastructure", "infrastructure"]) == [0.0, 0.0, 0.0]
    assert not has_signal("rloo", [0.9, 0.0, 0.0], ["ok", "infrastructure", "infrastructure"])
