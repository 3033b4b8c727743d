"""Grading one submission against a task's private answers, with MLE-bench's semantics.

Validation follows the competition's MLE-bench grader (columns, row count, ids, value range, rows
summing to one) and adds readable reasons for what MLE-bench would reject only through an
exception (NaN, non-numeric values, duplicate ids). Scores are rounded as MLE-bench's
`Grader.__call__` rounds them (`grader_round`). `grade_submission` never raises for a bad
submission: the outcome is a `GradeResult` with status `ok` or `invalid_submission`.
"""

from __future__ import annotations

import functools
import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np
import pandas as pd

from treegrpo.events import Status
from treegrpo.tasks import _metrics
from treegrpo.tasks._submission import (
    DEFAULT_MAX_BYTES,
    READ_KW,
    InvalidSubmission,
    read_submission,
)
from treegrpo.tasks._task import Metric, Task


class AnswersUnavailable(RuntimeError):
    """The grader cannot read a task's private answers: its own setup is wrong, not the node."""


@dataclass(frozen=True)
class GradeResult:
    status: Literal[Status.OK, Status.INVALID_SUBMISSION]
    test_metric: float | None
    oriented: float | None
    grade_error: str | None
    seconds: float

    @property
    def valid(self) -> bool:
        return self.status == Status.OK


@functools.lru_cache(maxsize=64)
def _answers_cached(path: str, mtime_ns: int, size: int) -> pd.DataFrame:
    return pd.read_csv(path, **READ_KW)


def load_answers(task: Task) -> pd.DataFrame:
    """The private answers of a task, read once per file version."""
    try:
        st = task.answers_path.stat()
        return _answers_cached(str(task.answers_path), st.st_mtime_ns, st.st_size)
    except (OSError, pd.errors.ParserError, pd.errors.EmptyDataError) as exc:
        raise AnswersUnavailable(
            f"answers of task {task.id} unreadable at {task.answers_path}: {exc}"
        ) from exc


def _examples(values, n: int = 3) -> str:
    items = list(values)[:n]
    return ", ".join(repr(v.item() if hasattr(v, "item") else v) for v in items)


def _check_columns(task: Task, frame: pd.DataFrame) -> None:
    cols = [str(c) for c in frame.columns]
    expected = list(task.submission_columns)
    missing = [c for c in expected if c not in cols]
    if missing:
        raise InvalidSubmission(f"missing columns {missing}; expected columns {expected}, got {cols[:20]}")
    extra = [c for c in cols if c not in expected]
    if task.validation.exact_columns and extra:
        raise InvalidSubmission(f"unexpected columns {extra[:10]}; expected exactly {expected}")
    if task.validation.id_first and cols[0] != task.id_column:
        raise InvalidSubmission(
            f"the first column must be {task.id_column!r} (the competition reads every "
            f"column after the first as a target), got columns {cols[:20]}"
        )


def _normalise_ids(sub_ids: pd.Series, ans_ids: pd.Series) -> pd.Series:
    """Integer answer ids accept integral numbers written as floats (1.0), as MLE-bench's set
    comparison does; everything else compares by its text."""
    if pd.api.types.is_integer_dtype(ans_ids) and pd.api.types.is_numeric_dtype(sub_ids):
        if sub_ids.notna().all() and np.all(np.mod(sub_ids.to_numpy(dtype=float), 1) == 0):
            return sub_ids.astype(np.int64)
    if pd.api.types.is_integer_dtype(ans_ids):
        return sub_ids
    return sub_ids.astype(str)


def _check_ids(task: Task, frame: pd.DataFrame, ans_ids: pd.Series) -> tuple[pd.Series, np.ndarray]:
    """The normalised ids, and for each answer row the submission row that holds it."""
    if len(frame) != len(ans_ids):
        more = "at least " if len(frame) > len(ans_ids) else ""
        raise InvalidSubmission(
            f"submission has {more}{len(frame)} rows, expected {len(ans_ids)} (one per test id)"
        )
    ids = _normalise_ids(frame[task.id_column], ans_ids)
    index = pd.Index(ids)
    if not index.is_unique:
        dup = ids[ids.duplicated()]
        raise InvalidSubmission(
            f"{len(dup)} duplicate {task.id_column} values, e.g. {_examples(dup.unique())}"
        )
    order = index.get_indexer(ans_ids)
    if (order < 0).any():  # same length, unique: a missing test id means an unknown one too
        unknown = ids[~ids.isin(ans_ids)]
        missing = ans_ids[order < 0]
        raise InvalidSubmission(
            f"{len(unknown)} {task.id_column} values are not test ids (e.g. {_examples(unknown)}); "
            f"{len(missing)} test ids are missing (e.g. {_examples(missing)})"
        )
    return ids, order


def _numeric(frame: pd.DataFrame, cols: list[str]) -> np.ndarray:
    if all(
        pd.api.types.is_numeric_dtype(frame[c]) and not pd.api.types.is_bool_dtype(frame[c]) for c in cols
    ):
        return frame[cols].to_numpy(dtype=np.float64)  # the common case: parsed as numbers already
    values = np.empty((len(frame), len(cols)), dtype=np.float64)
    for j, col in enumerate(cols):
        numeric = pd.to_numeric(frame[col], errors="coerce")
        bad = frame[col][numeric.isna() & frame[col].notna()]
        if len(bad):
            raise InvalidSubmission(
                f"column {col!r} is not numeric: {len(bad)} values like {_examples(bad.unique())}"
            )
        values[:, j] = numeric.to_numpy(dtype=np.float64)
    return values


def _check_values(task: Task, frame: pd.DataFrame, ids: pd.Series) -> np.ndarray:
    values = _numeric(frame, list(task.target_columns))
    nan_rows = np.isnan(values).any(axis=1)
    if nan_rows.any():
        raise InvalidSubmission(
            f"{int(nan_rows.sum())} rows have missing/NaN values, e.g. id {_examples(ids[nan_rows])}"
        )
    if not np.isfinite(values).all():
        raise InvalidSubmission("values must be finite (found inf)")
    if task.validation.probabilities and ((values < 0) | (values > 1)).any():
        raise InvalidSubmission(
            f"probabilities must lie in [0, 1]; found min {values.min():.6g}, max {values.max():.6g}"
        )
    if task.validation.rows_sum_to_one:
        sums = values.sum(axis=1)
        off = ~np.isclose(sums, 1.0, atol=task.validation.sum_tolerance)
        if off.any():
            k = int(np.argmax(off))
            raise InvalidSubmission(
                f"{int(off.sum())} rows do not sum to 1 (±{task.validation.sum_tolerance:g}), "
                f"e.g. id {_examples([ids.iloc[k]])} sums to {sums[k]:.6g}"
            )
    return values


def score_frame(task: Task, frame: pd.DataFrame, answers: pd.DataFrame) -> float:
    """Validate and score; raises `InvalidSubmission` with the reason. Unrounded."""
    _check_columns(task, frame)
    ids, order = _check_ids(task, frame, answers[task.id_column])
    values = _check_values(task, frame, ids)
    # MLE-bench's grade functions sort both frames by id before the metric; a mean over rows sums
    # in that order, so the same order gives the same last bits (ids are unique: any sort agrees)
    by_id = np.argsort(answers[task.id_column].to_numpy(), kind="stable")
    y_true = answers[list(task.target_columns)].to_numpy()[by_id]
    return _metrics.score(task.metric, y_true, values[order][by_id])  # rows aligned to the answers


def grader_round(raw) -> float:
    """MLE-bench's `Grader`: `round(score, 5)` of the value the grade function returned, as it is.
    A numpy float rounds by numpy's rule (scale, round half to even), a Python float exactly; at a
    tie in the 6th decimal they differ by 1e-5, so the raw value must not be converted first."""
    try:
        return float(round(raw, 5))
    except TypeError as exc:  # MLE-bench would fail on it too: not a score
        raise InvalidSubmission(
            f"the grade function returned {type(raw).__name__} {raw!r}, not a number"
        ) from exc


def grade_submission(task: Task, submission: Path | bytes, max_bytes: int = DEFAULT_MAX_BYTES) -> GradeResult:
    """Grade a submission file (or its bytes). Raises only `AnswersUnavailable` (grader-side)."""
    start = time.perf_counter()
    answers = None if task.metric is Metric.MLEBENCH else load_answers(task)
    try:
        # one row more than the answers is enough to know a file is too long
        frame = read_submission(submission, max_bytes, None if answers is None else len(answers) + 1)
        if task.metric is Metric.MLEBENCH:
            from treegrpo.tasks._mlebench import mlebench_score

            raw = mlebench_score(task, frame)
        else:
            raw = score_frame(task, frame, answers)  # type: ignore[arg-type]
        score = grader_round(raw)
        if not math.isfinite(score):
            raise InvalidSubmission(f"the metric came out as {score}")
    except InvalidSubmission as exc:
        return GradeResult(Status.INVALID_SUBMISSION, None, None, exc.reason, time.perf_counter() - start)
    return GradeResult(Status.OK, score, task.orient(score), None, time.perf_counter() - start)
