"""The systems load task: scores from completion bytes, deterministic, spread, with GRPO signal."""

from __future__ import annotations

import pytest

from treegrpo.advantages import compute
from treegrpo.tasks import (
    BUILTINS,
    LEARNING_BUILTINS,
    LOAD_TASKS,
    builtin_task,
    completion_score,
    ensure_builtin_tasks,
)
from treegrpo_grader.rewards import Member, Shaping, group_rewards

pytestmark = pytest.mark.timeout(10)


def test_the_same_bytes_give_the_same_score_and_text_scores_as_its_utf8():
    text = "def main():\n    print('héllo')\n"
    assert completion_score(text) == completion_score(text) == completion_score(text.encode())
    assert completion_score(text) != completion_score(text + " ")


def test_scores_of_different_completions_spread_over_zero_to_one():
    scores = [completion_score(f"completion {i}") for i in range(2000)]
    assert all(0.0 <= s < 1.0 for s in scores) and len(set(scores)) == len(scores)
    deciles = [sum(d / 10 <= s < (d + 1) / 10 for s in scores) for d in range(10)]
    assert min(deciles) > 150 and max(deciles) < 250  # ~200 each when uniform


def test_a_group_of_16_load_nodes_gives_non_zero_grpo_valid_only_advantages():
    members = [Member(f"n{i}", "ok", completion_score(f"random tokens {i}")) for i in range(16)]
    rewards = group_rewards(members, Shaping())
    adv = compute("grpo_valid_only", rewards, ["ok"] * 16)
    assert len(set(rewards)) == 16 and all(a != 0.0 for a in adv)
    assert sum(adv) == pytest.approx(0.0, abs=1e-9)


def test_load_bytes_is_a_builtin_load_task_on_spooky_data_apart_from_the_learning_tasks(tmp_path):
    task = builtin_task("load-bytes", tmp_path)
    assert (
        task.is_load and task.grading == "completion_bytes" and task.mirrors == "spooky-author-identification"
    )
    assert LOAD_TASKS == {"load-bytes"} and "load-bytes" not in LEARNING_BUILTINS
    assert set(LEARNING_BUILTINS) | LOAD_TASKS == set(BUILTINS)
    assert not builtin_task("spooky-mini", tmp_path).is_load


def test_load_bytes_is_generated_only_when_named_with_spooky_minis_public_files(tmp_path):
    assert "load-bytes" not in ensure_builtin_tasks(tmp_path, tasks=["spooky-mini"])
    load = ensure_builtin_tasks(tmp_path, tasks=["load-bytes"])["load-bytes"]
    spooky = tmp_path / "tasks/public/spooky-mini"
    names = sorted(p.name for p in spooky.iterdir())
    assert sorted(p.name for p in load.public_dir.iterdir()) == names
    assert all((load.public_dir / n).read_bytes() == (spooky / n).read_bytes() for n in names)
