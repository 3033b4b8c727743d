"""The four competition metrics, computed with the same scikit-learn functions MLE-bench calls.

Inputs are aligned arrays: `y_true` from the answers, `y_pred` from the validated submission, one
column per target. A metric that cannot be computed (e.g. scikit-learn refusing the input) is an
invalid submission, as in MLE-bench, where any exception in a grade function means "not valid".
"""

from __future__ import annotations

import warnings

import numpy as np
from sklearn.metrics import log_loss, roc_auc_score

from services.grader.tasks._submission import InvalidSubmission
from services.grader.tasks._task import Metric


def multiclass_log_loss(y_true: np.ndarray, y_pred: np.ndarray) -> float:
    """spooky-author-identification: y_true one-hot (n, k), y_pred probabilities (n, k)."""
    return float(log_loss(y_true, y_pred))


def roc_auc(y_true: np.ndarray, y_pred: np.ndarray) -> float:
    """aerial-cactus-identification: one binary target column."""
    return float(roc_auc_score(y_true[:, 0], y_pred[:, 0]))


def mean_column_roc_auc(y_true: np.ndarray, y_pred: np.ndarray) -> float:
    """plant-pathology-2020-fgvc7: the ROC AUC of each label column, averaged."""
    return float(np.mean([roc_auc_score(y_true[:, j], y_pred[:, j]) for j in range(y_true.shape[1])]))


def binary_log_loss(y_true: np.ndarray, y_pred: np.ndarray) -> float:
    """dogs-vs-cats-redux-kernels-edition: label = P(dog)."""
    return float(log_loss(y_true[:, 0], y_pred[:, 0], labels=[0, 1]))


_FUNCTIONS = {
    Metric.MULTICLASS_LOG_LOSS: multiclass_log_loss,
    Metric.ROC_AUC: roc_auc,
    Metric.MEAN_COLUMN_ROC_AUC: mean_column_roc_auc,
    Metric.BINARY_LOG_LOSS: binary_log_loss,
}


def score(metric: Metric, y_true: np.ndarray, y_pred: np.ndarray) -> float:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # sklearn's clipping notices are not the agent's problem
            return _FUNCTIONS[metric](y_true, y_pred)
    except ValueError as exc:
        raise InvalidSubmission(f"the {metric.value} metric rejected the submission: {exc}") from exc
