"""Scores are rounded as MLE-bench's `Grader` rounds them: `round(score, 5)` of the value the grade
function returned, as it is. Python and numpy round a tie at the 6th decimal apart (0.690625 gives
0.69063 as a Python float, 0.69062 as a numpy float), so the type of the raw value decides.

Imports a private module: `treegrpo.tasks._grade` (what these tests exercise is not on the package's
public surface).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import roc_auc_score

from treegrpo.tasks import COMPETITIONS, InvalidSubmission, grade_submission, task_from_spec
from treegrpo.tasks._grade import grader_round

pytestmark = pytest.mark.timeout(60)

# 4 positives and 40 negatives; the positives beat 40, 31, 21 and 18.5 negatives (one tie):
# AUC = 110.5 / 160 = 0.690625, a tie at the 6th decimal
LABELS = np.array([1] * 4 + [0] * 40)
SCORES = np.concatenate([[39.5, 30.5, 20.5, 18.0], np.arange(40.0)]) / 40


def tiny_task(tmp_path: Path, competition: str):
    spec = COMPETITIONS[competition]
    public, private = tmp_path / "public", tmp_path / "private"
    public.mkdir()
    private.mkdir()
    ids = [f"t{i:03d}" for i in range(len(LABELS))]
    answers = pd.DataFrame({spec.id_column: ids, **{c: LABELS for c in spec.target_columns}})
    answers.to_csv(private / spec.answers_file, index=False)
    submission = pd.DataFrame({spec.id_column: ids, **{c: SCORES for c in spec.target_columns}})
    task = task_from_spec(competition, competition, "", public, private, spec, "mlebench")
    return task, submission.to_csv(index=False).encode()


def test_the_fixture_is_a_tie_that_python_and_numpy_round_apart():
    auc = 110.5 / 160
    assert roc_auc_score(LABELS, SCORES) == auc == 0.690625
    assert round(auc, 5) == 0.69063 and round(np.float64(auc), 5) == 0.69062


def test_plant_rounds_its_numpy_mean_as_mle_bench_does(tmp_path):
    task, body = tiny_task(tmp_path, "plant-pathology-2020-fgvc7")
    # MLE-bench's plant grade function returns np.mean of the four column AUCs: a numpy float
    raw = np.mean([roc_auc_score(LABELS, SCORES) for _ in task.target_columns])
    result = grade_submission(task, body)
    assert result.status == "ok" and result.test_metric == round(raw, 5) == 0.69062


def test_cactus_rounds_the_value_scikit_learn_returns_here_as_mle_bench_does(tmp_path):
    task, body = tiny_task(tmp_path, "aerial-cactus-identification")
    raw = roc_auc_score(LABELS, SCORES)  # MLE-bench's cactus grade returns this value, as it is
    assert grade_submission(task, body).test_metric == round(raw, 5)


def test_grader_round_keeps_the_raw_values_type():
    assert grader_round(0.690625) == 0.69063
    assert grader_round(np.float64(0.690625)) == 0.69062
    assert grader_round(3) == 3.0 and isinstance(grader_round(np.float32(0.5)), float)
    with pytest.raises(InvalidSubmission, match="not a number"):
        grader_round(None)
