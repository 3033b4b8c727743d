"""The four competition metrics: the arithmetic of the scikit-learn functions MLE-bench calls,
operation for operation and in the same dtype, without their per-call input validation (which cost
~20 ms per ROC AUC; our own validation ran already). Raw values are bit-identical to
scikit-learn's, not merely equal to 5 decimals: a value on a rounding boundary must round the way
MLE-bench rounds it (tests/unit/test_grader_parity_ties.py compares the bits on tie-heavy input).

- log loss: probabilities clipped to [eps, 1 - eps] (eps = float64 machine epsilon); per row
  −Σ y·log p with `y * np.log(p)` zeroed where y == 0 (scikit-learn's `_xlogy`, not scipy's
  `xlogy`, whose log can differ in the last bit); then the mean over rows.
- ROC AUC: `roc_curve` (scores sorted descending, cumulative true/false positives at each distinct
  score, collinear points dropped, (0, 0) prepended, divided by the totals) integrated by the
  trapezoid rule as `auc` does. The Mann–Whitney statistic equals it in exact arithmetic only.

Rows must come in the order MLE-bench's grade function sees them (sorted by id): a mean over rows
depends on the order of its terms in the last bits (see `_grade.score_frame`).

Each metric returns its value as the scalar type MLE-bench's grade function returns it (a numpy
float for plant's `np.mean`; for the others whatever the installed scikit-learn returns: numpy's
float64 in older releases, Python's float in recent ones), because MLE-bench's `Grader` rounds
that raw value with `round(score, 5)`, and Python and numpy round a tie at the 6th decimal apart.

Inputs are aligned arrays: `y_true` from the answers, `y_pred` from the validated submission, one
column per target. A metric that cannot be computed is an invalid submission, as in MLE-bench,
where any exception in a grade function means "not valid".
"""

from __future__ import annotations

import functools

import numpy as np

from treegrpo.tasks._submission import InvalidSubmission
from treegrpo.tasks._task import Metric

EPS = float(np.finfo(np.float64).eps)


@functools.cache
def sklearn_scalar_types() -> tuple[type, type]:
    """The scalar types `roc_auc_score` and `log_loss` return in this environment (asked once)."""
    try:
        from sklearn.metrics import log_loss, roc_auc_score
    except ImportError:  # no scikit-learn, so no MLE-bench either: the numpy scalars it returned for years
        return np.float64, np.float64
    return type(roc_auc_score([0, 1], [0.0, 1.0])), type(log_loss([0, 1], [[0.9, 0.1], [0.1, 0.9]]))


def _log_loss(onehot: np.ndarray, proba: np.ndarray) -> float:
    proba = np.clip(proba.astype(np.float64), EPS, 1 - EPS)
    labels = onehot.astype(np.float64)
    terms = np.where(labels == 0.0, 0.0, labels * np.log(proba))
    return sklearn_scalar_types()[1](np.mean(-np.sum(terms, axis=1)))


def multiclass_log_loss(y_true: np.ndarray, y_pred: np.ndarray) -> float:
    """spooky-author-identification: y_true one-hot (n, k), y_pred probabilities (n, k)."""
    return _log_loss(y_true, y_pred)


def binary_log_loss(y_true: np.ndarray, y_pred: np.ndarray) -> float:
    """dogs-vs-cats-redux-kernels-edition: label = P(dog)."""
    y, p = y_true[:, 0].astype(np.float64), y_pred[:, 0]
    if not np.isin(y, (0, 1)).all():
        raise ValueError("labels must be 0 or 1")
    return _log_loss(np.stack([1 - y, y], axis=1), np.stack([1 - p, p], axis=1))


def roc_curve_points(y: np.ndarray, score: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(fpr, tpr) as `sklearn.metrics.roc_curve` returns them (drop_intermediate=True)."""
    order = np.argsort(score, kind="stable")[::-1]  # descending; order within a tie is irrelevant
    ordered = score[order]
    ends = np.append(np.flatnonzero(np.diff(ordered)), len(ordered) - 1)  # last row of each score
    tps = np.cumsum(y[order].astype(np.float64))[ends]
    fps = 1 + ends.astype(np.float64) - tps
    if len(fps) > 2:  # keep only the corners of the curve
        keep = np.concatenate([[True], np.logical_or(np.diff(fps, 2), np.diff(tps, 2)), [True]])
        fps, tps = fps[keep], tps[keep]
    fps, tps = np.concatenate([[0.0], fps]), np.concatenate([[0.0], tps])
    return fps / fps[-1], tps / tps[-1]


def binary_auc(y: np.ndarray, score: np.ndarray) -> float:
    positive = y == 1
    n_pos = int(positive.sum())
    if n_pos == 0 or n_pos == len(y):
        raise ValueError("Only one class present in y_true. ROC AUC score is not defined in that case.")
    fpr, tpr = roc_curve_points(positive, score)
    return sklearn_scalar_types()[0](np.trapezoid(tpr, fpr))  # `auc`: scipy's trapezoid, same sums


def roc_auc(y_true: np.ndarray, y_pred: np.ndarray) -> float:
    """aerial-cactus-identification: one binary target column."""
    return binary_auc(y_true[:, 0], y_pred[:, 0])


def mean_column_roc_auc(y_true: np.ndarray, y_pred: np.ndarray) -> float:
    """plant-pathology-2020-fgvc7: the ROC AUC of each label column, averaged (a numpy float, as there)."""
    return np.mean([binary_auc(y_true[:, j], y_pred[:, j]) for j in range(y_true.shape[1])])


_FUNCTIONS = {
    Metric.MULTICLASS_LOG_LOSS: multiclass_log_loss,
    Metric.ROC_AUC: roc_auc,
    Metric.MEAN_COLUMN_ROC_AUC: mean_column_roc_auc,
    Metric.BINARY_LOG_LOSS: binary_log_loss,
}


def score(metric: Metric, y_true: np.ndarray, y_pred: np.ndarray) -> float:
    try:
        with np.errstate(all="ignore"):
            return _FUNCTIONS[metric](y_true, y_pred)
    except ValueError as exc:
        raise InvalidSubmission(f"the {metric.value} metric rejected the submission: {exc}") from exc
