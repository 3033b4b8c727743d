"""Our metric arithmetic equals scikit-learn's (what MLE-bench calls) to the 5 decimals reported.

Imports a private module: `treegrpo.tasks._metrics` (what these tests exercise is not on the package's
public surface).
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.metrics import log_loss, roc_auc_score

from treegrpo.tasks import InvalidSubmission, Metric
from treegrpo.tasks._metrics import score

seeds = st.integers(min_value=0, max_value=2**32 - 1)


def _scores(rng, n: int, ties: bool) -> np.ndarray:
    s = rng.random(n)
    return np.round(s, 1) if ties else s  # rounding makes many ties


@settings(max_examples=60, deadline=None)
@given(seeds, st.integers(min_value=2, max_value=400), st.booleans())
def test_roc_auc_equals_scikit_learn_with_and_without_ties(seed, n, ties):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 2, n)
    y[0], y[1] = 0, 1
    s = _scores(rng, n, ties)
    assert round(score(Metric.ROC_AUC, y[:, None], s[:, None]), 5) == round(roc_auc_score(y, s), 5)


@settings(max_examples=40, deadline=None)
@given(seeds, st.integers(min_value=8, max_value=300), st.booleans())
def test_mean_column_roc_auc_equals_scikit_learn(seed, n, ties):
    rng = np.random.default_rng(seed)
    labels = np.concatenate([np.arange(4), rng.integers(0, 4, n - 4)])
    y = np.eye(4, dtype=int)[labels]
    s = np.stack([_scores(rng, n, ties) for _ in range(4)], axis=1)
    want = np.mean([roc_auc_score(y[:, j], s[:, j]) for j in range(4)])
    assert round(score(Metric.MEAN_COLUMN_ROC_AUC, y, s), 5) == round(want, 5)  # both numpy floats


@settings(max_examples=60, deadline=None)
@given(seeds, st.integers(min_value=3, max_value=400), st.booleans())
def test_log_losses_equal_scikit_learn_including_zero_and_one_probabilities(seed, n, extreme):
    rng = np.random.default_rng(seed)
    labels = np.concatenate([np.arange(3), rng.integers(0, 3, n - 3)])
    p = rng.dirichlet(np.ones(3), n)
    if extreme:
        p[::7] = np.eye(3)[rng.integers(0, 3, len(p[::7]))]  # confident, sometimes wrong
    y = np.eye(3, dtype=int)[labels]
    assert round(score(Metric.MULTICLASS_LOG_LOSS, y, p), 5) == round(log_loss(y, p), 5)
    b = (labels % 2)[:, None]
    q = p[:, :1]
    assert round(score(Metric.BINARY_LOG_LOSS, b, q), 5) == round(
        log_loss(b[:, 0], q[:, 0], labels=[0, 1]), 5
    )


def test_each_metric_returns_the_scalar_type_mle_benchs_grade_function_returns():
    rng = np.random.default_rng(0)
    y, p = np.eye(3, dtype=int)[[0, 1, 2, 1]], rng.dirichlet(np.ones(3), 4)
    assert type(score(Metric.ROC_AUC, y[:, :1], p[:, :1])) is type(roc_auc_score(y[:, 0], p[:, 0]))
    assert type(score(Metric.MULTICLASS_LOG_LOSS, y, p)) is type(log_loss(y, p))
    assert type(score(Metric.BINARY_LOG_LOSS, y[:, :1], p[:, :1])) is type(log_loss(y[:, 0], p[:, 0]))
    assert type(score(Metric.MEAN_COLUMN_ROC_AUC, y, p)) is np.float64  # plant: np.mean of the AUCs


def test_auc_of_a_single_class_is_invalid_as_in_scikit_learn():
    with pytest.raises(InvalidSubmission, match="Only one class"):
        score(Metric.ROC_AUC, np.ones((5, 1)), np.random.default_rng(0).random((5, 1)))
