"""Submission validation and scoring: MLE-bench's semantics, a readable reason for every bad input."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import log_loss, roc_auc_score

from treegrpo.tasks import (
    COMPETITIONS,
    Metric,
    TaskRegistry,
    UnknownTask,
    UnsupportedCompetition,
    ensure_builtin_tasks,
    grade_submission,
    read_competition,
)

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def tasks(tmp_path_factory):
    return ensure_builtin_tasks(tmp_path_factory.mktemp("home"))


def answers(task) -> pd.DataFrame:
    return pd.read_csv(task.answers_path)


def predictions(task, seed: int = 0) -> pd.DataFrame:
    """A valid, imperfect submission: noisy answers, rows normalised where they must sum to one."""
    ans = answers(task)
    cols = list(task.target_columns)
    rng = np.random.default_rng(seed)
    values = np.clip(0.6 * ans[cols].to_numpy(float) + rng.uniform(0, 0.4, (len(ans), len(cols))), 0, 1)
    if task.validation.rows_sum_to_one:
        values /= values.sum(axis=1, keepdims=True)
    sub = pd.DataFrame(values, columns=cols)
    sub.insert(0, task.id_column, ans[task.id_column])
    return sub.sample(frac=1.0, random_state=seed)  # row order must not matter


def grade(task, frame: pd.DataFrame):
    return grade_submission(task, frame.to_csv(index=False).encode())


def test_scores_match_scikit_learn_on_aligned_rows_rounded_as_mle_bench_rounds(tasks):
    expected = {
        "spooky-mini": lambda y, p: log_loss(y, p),
        "cactus-mini": lambda y, p: roc_auc_score(y[:, 0], p[:, 0]),
        "plant-mini": lambda y, p: np.mean([roc_auc_score(y[:, j], p[:, j]) for j in range(4)]),
        "dogscats-mini": lambda y, p: log_loss(y[:, 0], p[:, 0]),
    }
    for task_id, fn in expected.items():
        task = tasks[task_id]
        sub, ans = predictions(task), answers(task)
        aligned = sub.set_index(task.id_column).loc[ans[task.id_column]]
        # MLE-bench's Grader: round(score, 5) of the grade function's value, whatever its type
        want = round(fn(ans[list(task.target_columns)].to_numpy(), aligned.to_numpy()), 5)
        got = grade(task, sub)
        assert got.status == "ok" and got.test_metric == want
        assert got.oriented == (-want if task.lower_is_better else want)


BAD = {
    "wrong columns": (lambda t, d: d.rename(columns={d.columns[1]: "nope"}), "missing columns"),
    "missing id": (lambda t, d: d.iloc[1:], "rows, expected"),
    "extra id": (
        lambda t, d: pd.concat([d, d.iloc[:1].assign(**{t.id_column: d[t.id_column].iloc[0]})]),
        "rows, expected",
    ),
    "duplicate id": (
        lambda t, d: d.assign(
            **{
                t.id_column: [d[t.id_column].iloc[0]]
                + list(d[t.id_column].iloc[1:-1])
                + [d[t.id_column].iloc[0]]
            }
        ),
        "duplicate",
    ),
    "unknown id": (lambda t, d: d.assign(**{t.id_column: d[t.id_column].astype(str) + "x"}), "not test ids"),
    "nan": (
        lambda t, d: d.assign(
            **{t.target_columns[0]: np.where(np.arange(len(d)) == 5, np.nan, d[t.target_columns[0]])}
        ),
        "NaN",
    ),
    "text values": (lambda t, d: d.assign(**{t.target_columns[0]: "high"}), "not numeric"),
    "inf": (lambda t, d: d.assign(**{t.target_columns[0]: np.inf}), "finite"),
}


@pytest.mark.parametrize("case", sorted(BAD))
@pytest.mark.parametrize("task_id", ["spooky-mini", "cactus-mini", "plant-mini", "dogscats-mini"])
def test_bad_submission_is_invalid_with_a_reason(tasks, task_id, case):
    task = tasks[task_id]
    mutate, words = BAD[case]
    result = grade(task, mutate(task, predictions(task)))
    assert result.status == "invalid_submission" and result.test_metric is None and result.oriented is None
    assert words in result.grade_error, result.grade_error


@pytest.mark.parametrize("task_id", ["spooky-mini", "cactus-mini", "dogscats-mini"])
def test_probabilities_outside_0_1_are_invalid(tasks, task_id):
    task = tasks[task_id]
    sub = predictions(task)
    col = task.target_columns[0]
    sub[col] = sub[col] + 1.5
    result = grade(task, sub)
    assert result.status == "invalid_submission" and "[0, 1]" in result.grade_error


def test_plant_scores_are_ranked_without_a_range_check_as_in_mle_bench(tasks):
    task = tasks["plant-mini"]
    sub = predictions(task)
    shifted = sub.assign(**{c: sub[c] * 10 - 3 for c in task.target_columns})  # AUC is rank-invariant
    assert grade(task, shifted).test_metric == grade(task, sub).test_metric


def test_spooky_rows_must_sum_to_one_within_1e_6(tasks):
    task = tasks["spooky-mini"]
    sub = predictions(task)
    assert grade(task, sub.assign(EAP=sub.EAP + 5e-7)).status == "ok"
    bad = grade(task, sub.assign(EAP=sub.EAP + 1e-3))
    assert bad.status == "invalid_submission" and "sum to 1" in bad.grade_error


def test_spooky_id_column_must_come_first_as_in_mle_bench(tasks):
    task = tasks["spooky-mini"]
    sub = predictions(task)
    assert grade(task, sub[["id", "MWS", "EAP", "HPL"]]).status == "ok"  # class columns in any order
    bad = grade(task, sub[["EAP", "id", "HPL", "MWS"]])  # MLE-bench reads columns 1: as probabilities
    assert bad.status == "invalid_submission" and "first column must be 'id'" in bad.grade_error
    other = grade(tasks["dogscats-mini"], predictions(tasks["dogscats-mini"])[["label", "id"]])
    assert other.status == "ok"  # dogs-vs-cats selects its columns by name


def test_extra_columns_follow_each_competition(tasks):
    assert grade(tasks["cactus-mini"], predictions(tasks["cactus-mini"]).assign(note=1)).status == "ok"
    assert grade(tasks["dogscats-mini"], predictions(tasks["dogscats-mini"]).assign(note=1)).status == "ok"
    for task_id in ("spooky-mini", "plant-mini"):
        result = grade(tasks[task_id], predictions(tasks[task_id]).assign(note=1))
        assert "unexpected columns ['note']" in result.grade_error


def test_integer_ids_written_as_floats_are_accepted(tasks):
    task = tasks["dogscats-mini"]
    sub = predictions(task)
    assert grade(task, sub.assign(id=sub.id.astype(float))).test_metric == grade(task, sub).test_metric


@pytest.mark.parametrize(
    "raw, words",
    [
        (b"", "empty"),
        (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", "binary"),
        (b"just some words\nand more\n", "not a comma-separated file"),
        (b"\n\n\n", "no header"),
        (b"id,EAP,HPL,MWS\n", "no rows"),
        ("id,EAP\n\xe9t\xe9,1\n".encode("latin-1"), "not UTF-8"),
        (b'id,EAP,HPL,MWS\n"id1,0.2,0.3,0.5\n', "not a valid CSV"),
        (b"id,EAP,HPL,MWS\nid1,0.2,0.3,0.5,9,9,9\n", "not a valid CSV"),
    ],
)
def test_unreadable_files_are_invalid_with_a_reason(tasks, raw, words):
    result = grade_submission(tasks["spooky-mini"], raw)
    assert result.status == "invalid_submission" and words in result.grade_error, result.grade_error


def test_a_1_gb_file_is_rejected_by_its_size_before_reading(tasks, tmp_path):
    path = tmp_path / "submission.csv"
    with open(path, "wb") as fh:  # sparse: 1 GiB on paper, nothing on disk
        fh.write(b"id,EAP,HPL,MWS\n")
        fh.truncate(2**30)
    result = grade_submission(tasks["spooky-mini"], path)
    assert result.status == "invalid_submission" and "1.0 GiB, over the 64.0 MiB limit" in result.grade_error
    assert result.seconds < 0.5


def test_missing_file_is_invalid(tasks, tmp_path):
    result = grade_submission(tasks["spooky-mini"], tmp_path / "nothing.csv")
    assert result.status == "invalid_submission" and "no submission.csv" in result.grade_error


def mlebench_root(tmp_path: Path, tasks) -> Path:
    """An MLE-bench-style data root built from the built-in tasks' files."""
    import shutil

    root = tmp_path / "mle"
    for task in tasks.values():
        spec = COMPETITIONS[task.mirrors]
        comp = root / task.mirrors / "prepared"
        shutil.copytree(task.public_dir, comp / "public")
        (comp / "private").mkdir(parents=True)
        shutil.copy(task.answers_path, comp / "private" / spec.answers_file)
    (root / task.mirrors / "config.yaml").write_text(f"id: {task.mirrors}\nname: Mirror\n")
    return root


def test_mle_bench_data_root_is_read_and_graded_by_our_implementations(tasks, tmp_path):
    root = mlebench_root(tmp_path, tasks)
    registry = TaskRegistry(tmp_path / "home", [root])
    for builtin in tasks.values():
        task = registry.get(builtin.mirrors)
        assert task.source == "mlebench" and task.metric is not Metric.MLEBENCH
        assert task.public_dir == root / builtin.mirrors / "prepared" / "public"
        assert task.description == builtin.description  # read from the public description.md
        sub = predictions(builtin)
        assert grade(task, sub).test_metric == grade(builtin, sub).test_metric
    assert registry.get("dogs-vs-cats-redux-kernels-edition").name == "Mirror"
    assert set(registry.ids()) >= set(COMPETITIONS) | set(tasks)


def test_unknown_and_unsupported_tasks_are_clear_errors(tasks, tmp_path):
    root = tmp_path / "mle"
    (root / "some-other-competition" / "prepared" / "public").mkdir(parents=True)
    registry = TaskRegistry(tmp_path / "home", [root])
    with pytest.raises(UnknownTask, match="built-in tasks are"):
        registry.get("no-such-task")
    with pytest.raises(UnsupportedCompetition, match="mlebench"):
        read_competition(root, "some-other-competition", use_mlebench=False)


def test_a_long_file_is_rejected_after_one_row_too_many_without_parsing_the_rest(tasks):
    task = tasks["spooky-mini"]
    sub = predictions(task)
    body = (
        sub.to_csv(index=False).encode() + sub.iloc[:1].to_csv(index=False, header=False).encode() * 200_000
    )
    result = grade_submission(task, body)
    assert result.status == "invalid_submission" and "at least 601 rows, expected 600" in result.grade_error
    assert result.seconds < 1.0
