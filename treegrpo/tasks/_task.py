"""What a task is: where its data lives, how it is scored, what a valid submission looks like.

The four competitions the seed trained on are described once here (`COMPETITIONS`); the built-in
offline tasks and MLE-bench data roots both point at one of these specs, so a built-in task is
graded by exactly the rules of the competition it mirrors.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Literal

Grading = Literal["metric", "completion_bytes"]


class Metric(StrEnum):
    MULTICLASS_LOG_LOSS = "multiclass_log_loss"  # spooky-author-identification
    ROC_AUC = "roc_auc"  # aerial-cactus-identification
    MEAN_COLUMN_ROC_AUC = "mean_column_roc_auc"  # plant-pathology-2020-fgvc7
    BINARY_LOG_LOSS = "binary_log_loss"  # dogs-vs-cats-redux-kernels-edition
    MLEBENCH = "mlebench"  # the installed mlebench package's grade_fn


@dataclass(frozen=True)
class Validation:
    """MLE-bench's validity rules for one competition, as data.

    `exact_columns`: the submission's column set must equal the expected set (extra columns are an
    error); otherwise extras are ignored. `probabilities`: every target value must lie in [0, 1].
    `rows_sum_to_one`: each row of the target columns sums to 1 within `sum_tolerance`.
    `id_first`: the id column must come first (MLE-bench reads every column after the first as a
    target there)."""

    exact_columns: bool
    probabilities: bool
    rows_sum_to_one: bool = False
    sum_tolerance: float = 1e-6
    id_first: bool = False


@dataclass(frozen=True)
class CompetitionSpec:
    competition: str
    metric: Metric
    lower_is_better: bool
    id_column: str
    target_columns: tuple[str, ...]
    answers_file: str  # inside the private folder
    validation: Validation

    @property
    def submission_columns(self) -> tuple[str, ...]:
        return (self.id_column, *self.target_columns)


COMPETITIONS: dict[str, CompetitionSpec] = {
    "spooky-author-identification": CompetitionSpec(
        "spooky-author-identification",
        Metric.MULTICLASS_LOG_LOSS,
        True,
        "id",
        ("EAP", "HPL", "MWS"),
        "test.csv",
        Validation(exact_columns=True, probabilities=True, rows_sum_to_one=True, id_first=True),
    ),
    "aerial-cactus-identification": CompetitionSpec(
        "aerial-cactus-identification",
        Metric.ROC_AUC,
        False,
        "id",
        ("has_cactus",),
        "test.csv",
        Validation(exact_columns=False, probabilities=True),
    ),
    # MLE-bench ranks these scores without a range check (AUC is rank-based); so do we.
    "plant-pathology-2020-fgvc7": CompetitionSpec(
        "plant-pathology-2020-fgvc7",
        Metric.MEAN_COLUMN_ROC_AUC,
        False,
        "image_id",
        ("healthy", "multiple_diseases", "rust", "scab"),
        "test.csv",
        Validation(exact_columns=True, probabilities=False),
    ),
    "dogs-vs-cats-redux-kernels-edition": CompetitionSpec(
        "dogs-vs-cats-redux-kernels-edition",
        Metric.BINARY_LOG_LOSS,
        True,
        "id",
        ("label",),
        "answers.csv",
        Validation(exact_columns=False, probabilities=True),
    ),
}


@dataclass(frozen=True)
class Task:
    """One gradable task. `public_dir` is what the agent's script sees as `./input/`;
    `private_dir` holds the answers and is read by the grader alone."""

    id: str
    name: str
    description: str
    public_dir: Path
    private_dir: Path
    answers_path: Path
    metric: Metric
    lower_is_better: bool
    id_column: str
    submission_columns: tuple[str, ...]
    validation: Validation
    source: Literal["builtin", "mlebench"]
    mirrors: str  # the MLE-bench competition id whose rules apply
    # "completion_bytes": a systems load task (treegrpo/tasks/_load.py): each node's score comes from
    # its completion's bytes, not from its submission; never a learning measurement
    grading: Grading = "metric"

    @property
    def is_load(self) -> bool:
        return self.grading == "completion_bytes"

    @property
    def direction(self) -> Literal["lower", "higher"]:
        return "lower" if self.lower_is_better else "higher"

    @property
    def target_columns(self) -> tuple[str, ...]:
        return tuple(c for c in self.submission_columns if c != self.id_column)

    def orient(self, score: float) -> float:
        """Higher is always better: the sign flips for a lower-is-better metric."""
        if not math.isfinite(score):
            raise ValueError(f"score {score} is not finite")
        return -score if self.lower_is_better else score


def task_from_spec(
    task_id: str,
    name: str,
    description: str,
    public_dir: Path,
    private_dir: Path,
    spec: CompetitionSpec,
    source: Literal["builtin", "mlebench"],
    answers_file: str | None = None,
    grading: Grading = "metric",
) -> Task:
    return Task(
        id=task_id,
        name=name,
        description=description,
        public_dir=public_dir,
        private_dir=private_dir,
        answers_path=private_dir / (answers_file or spec.answers_file),
        metric=spec.metric,
        lower_is_better=spec.lower_is_better,
        id_column=spec.id_column,
        submission_columns=spec.submission_columns,
        validation=spec.validation,
        source=source,
        mirrors=spec.competition,
        grading=grading,
    )
