"""The four competition metrics: the arithmetic of the scikit-learn functions MLE-bench calls,
without their per-call input validation (which cost ~20 ms per ROC AUC; our own validation ran
already). tests/unit/test_grader_metrics.py checks equality with scikit-learn to the 5 decimals
MLE-bench reports.

- log loss: probabilities clipped to [eps, 1 - eps] (eps = float64 machine epsilon), as
  `sklearn.metrics.log_loss` does; mean over rows of −Σ y·log p.
- ROC AUC: the Mann–Whitney statistic with tied scores counted one half, which equals the area
  under the ROC curve that `roc_auc_score` integrates.

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
from scipy.special import xlogy

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
    return sklearn_scalar_types()[1](np.mean(-np.sum(xlogy(onehot.astype(np.float64), proba), axis=1)))


def multiclass_log_loss(y_true: np.ndarray, y_pred: np.ndarray) -> float:
    """spooky-author-identification: y_true one-hot (n, k), y_pred probabilities (n, k)."""
    return _log_loss(y_true, y_pred)


def binary_log_loss(y_true: np.ndarray, y_pred: np.ndarray) -> float:
    """dogs-vs-cats-redux-kernels-edition: label = P(dog)."""
    y, p = y_true[:, 0].astype(np.float64), y_pred[:, 0]
    if not np.isin(y, (0, 1)).all():
        raise ValueError("labels must be 0 or 1")
    return _log_loss(np.stack([1 - y, y], axis=1), np.stack([1 - p, p], axis=1))


def average_ranks(values: np.ndarray) -> np.ndarray:
    """1-based ranks, ties sharing their average rank (scipy's rankdata "average", without its overhead)."""
    n = len(values)
    order = np.argsort(values, kind="mergesort")
    ordered = values[order]
    first = np.empty(n, dtype=bool)
    first[0] = True
    np.not_equal(ordered[1:], ordered[:-1], out=first[1:])
    starts = np.flatnonzero(first)
    ends = np.append(starts[1:], n)
    ranks = np.empty(n, dtype=np.float64)
    ranks[order] = ((starts + ends + 1) / 2.0)[np.cumsum(first) - 1]
    return ranks


def binary_auc(y: np.ndarray, score: np.ndarray) -> float:
    y = y.astype(np.float64)
    n_pos = float(y.sum())
    n_neg = float(len(y) - n_pos)
    if n_pos == 0 or n_neg == 0:
        raise ValueError("Only one class present in y_true. ROC AUC score is not defined in that case.")
    ranks = average_ranks(score)
    return sklearn_scalar_types()[0]((ranks[y == 1].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))


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
