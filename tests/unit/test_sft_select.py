"""The archive selection rule as a pure function of scored groups."""

from __future__ import annotations

import pytest

from treegrpo_learner.sft import Member, ScoredGroup, select_nodes


def group(run: str, task: str, step: int, members: list[tuple[str, float, str, float | None]]) -> ScoredGroup:
    return ScoredGroup(run, f"{task}-{step}", task, 1, step, tuple(Member(*m) for m in members))


GROUPS = [
    group("r", "a", 0, [("a0", 0.1, "ok", 1.0), ("a1", 0.3, "ok", 2.0), ("a2", 0.9, "crashed", None)]),
    group("r", "a", 1, [("b0", 0.3, "ok", 2.0), ("b1", 0.3, "ok", 2.0)]),  # full tie: smaller id
    group("r", "b", 0, [("c0", -0.5, "crashed", None), ("c1", -0.5, "timeout", None)]),
    group("s", "a", 0, [("d0", 0.5, "ok", 0.1)]),  # another run
]


def test_best_per_group_ignores_invalid_siblings_and_breaks_ties_deterministically():
    assert select_nodes(GROUPS, "best-per-group") == [("r", "a1"), ("r", "b0"), ("s", "d0")]


def test_top_k_is_per_run_and_task_and_never_picks_a_failed_node():
    assert select_nodes(GROUPS, "top-k", top_k=2) == [("r", "a1"), ("r", "b0"), ("s", "d0")]
    assert select_nodes(GROUPS, "top-k", top_k=9) == [
        ("r", "a1"),
        ("r", "b0"),
        ("r", "b1"),
        ("r", "a0"),
        ("s", "d0"),
    ]


def test_min_reward_and_unknown_rules():
    assert select_nodes(GROUPS, "best-per-group", min_reward=0.4) == [("s", "d0")]
    with pytest.raises(ValueError):
        select_nodes(GROUPS, "random")
