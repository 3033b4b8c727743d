"""Raw scores are bit-identical to what MLE-bench's grade functions compute with scikit-learn.

Rounding to 5 decimals hides nothing when the raw value sits on a rounding boundary: a Mann–Whitney
AUC equal in exact arithmetic to scikit-learn's trapezoid over the ROC curve can differ in the last
bit, and then round the other way (an outside cross-check found 10 of 543 tie-heavy cactus
submissions graded 0.50849 here and 0.50850 by MLE-bench). So each of the four competitions is
graded here on tie-heavy predictions and compared, value and type, with a reference that does what
the competition's MLE-bench grade function does: read both CSVs with pandas, sort both by id, call
scikit-learn (`roc_auc_score`, `log_loss`; plant: `np.mean` of the four column AUCs).

The answers files are written in a shuffled row order: a data root's answers need not be sorted by
id, and the order in which log losses sum their rows changes the last bits.
"""

from __future__ import annotations

import io
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import log_loss, roc_auc_score

from treegrpo.tasks import (
    COMPETITIONS,
    grade_submission,
    load_answers,
    read_submission,
    score_frame,
    task_from_spec,
)

pytestmark = pytest.mark.timeout(120)

N_ROWS = 400
SEEDS = range(40)
SPOOKY_ROWS = np.array(
    [[0.2, 0.3, 0.5], [1 / 3, 1 / 3, 1 / 3], [0.7, 0.2, 0.1], [0.05, 0.9, 0.05], [0, 0, 1]]
)


def _ids(competition: str, n: int, rng) -> list:
    """Ids shaped like the built-in tasks' (see treegrpo/tasks/_builtin.py)."""
    if competition == "aerial-cactus-identification":
        return [f"{v:08x}.png" for v in rng.choice(2**32, size=n, replace=False)]
    if competition == "plant-pathology-2020-fgvc7":
        return [f"Test_{i}" for i in range(n)]
    if competition == "spooky-author-identification":
        return [f"id{v:05d}" for v in rng.choice(10**5, size=n, replace=False)]
    return list(range(1, n + 1))


def _labels(competition: str, n: int, rng) -> pd.DataFrame:
    cols = COMPETITIONS[competition].target_columns
    if len(cols) == 1:
        y = (rng.random(n) < rng.uniform(0.2, 0.8)).astype(int)
        y[:2] = (0, 1)
        return pd.DataFrame({cols[0]: y})
    k = np.concatenate([np.arange(len(cols)), rng.integers(0, len(cols), n - len(cols))])
    return pd.DataFrame(np.eye(len(cols), dtype=int)[k], columns=list(cols))


def _tied_predictions(competition: str, n: int, rng) -> pd.DataFrame:
    """Few distinct values: long runs of tied scores (and of equal per-row losses)."""
    cols = COMPETITIONS[competition].target_columns
    if competition == "spooky-author-identification":
        return pd.DataFrame(SPOOKY_ROWS[rng.integers(0, len(SPOOKY_ROWS), n)], columns=list(cols))
    levels = np.round(rng.random(int(rng.integers(2, 12))), int(rng.integers(1, 4)))
    return pd.DataFrame({c: levels[rng.integers(0, len(levels), n)] for c in cols})


def make_case(tmp_path: Path, competition: str, seed: int):
    spec = COMPETITIONS[competition]
    rng = np.random.default_rng([seed, len(competition)])
    ids = _ids(competition, N_ROWS, rng)
    answers = pd.concat([pd.DataFrame({spec.id_column: ids}), _labels(competition, N_ROWS, rng)], axis=1)
    submission = pd.concat(
        [pd.DataFrame({spec.id_column: ids}), _tied_predictions(competition, N_ROWS, rng)], axis=1
    )
    root = tmp_path / f"{competition}-{seed}"
    (root / "public").mkdir(parents=True)
    (root / "private").mkdir()
    answers.sample(frac=1, random_state=seed).to_csv(root / "private" / spec.answers_file, index=False)
    body = submission.sample(frac=1, random_state=seed + 1).to_csv(index=False).encode()
    task = task_from_spec(competition, competition, "", root / "public", root / "private", spec, "mlebench")
    return task, body


def mle_bench_reference(competition: str, answers_path: Path, body: bytes):
    """What the competition's MLE-bench grade function computes: both frames sorted by id, then
    the scikit-learn call (input validation and all)."""
    spec = COMPETITIONS[competition]
    sub = pd.read_csv(io.BytesIO(body)).sort_values(spec.id_column).reset_index(drop=True)
    ans = pd.read_csv(answers_path).sort_values(spec.id_column).reset_index(drop=True)
    cols = list(spec.target_columns)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # log_loss's y_pred, as MLE-bench passes it
        if competition == "aerial-cactus-identification":
            return roc_auc_score(y_true=ans[cols[0]].to_numpy(), y_score=sub[cols[0]].to_numpy())
        if competition == "plant-pathology-2020-fgvc7":
            return np.mean([roc_auc_score(y_true=ans[c], y_score=sub[c]) for c in cols])
        if competition == "spooky-author-identification":
            return log_loss(y_true=ans[cols].to_numpy(), y_pred=sub[cols].to_numpy())
        return log_loss(y_true=ans[cols[0]], y_pred=sub[cols[0]])


@pytest.mark.parametrize("competition", sorted(COMPETITIONS))
def test_raw_scores_on_tied_predictions_are_bit_identical_to_scikit_learns(tmp_path, competition):
    differing, rounded_apart = [], []
    for seed in SEEDS:
        task, body = make_case(tmp_path, competition, seed)
        raw = score_frame(task, read_submission(body, 1 << 26, None), load_answers(task))
        want = mle_bench_reference(competition, task.answers_path, body)
        if type(raw) is not type(want) or float(raw).hex() != float(want).hex():
            differing.append(f"seed {seed}: {float(raw).hex()} ({raw!r}) vs {float(want).hex()} ({want!r})")
        if grade_submission(task, body).test_metric != float(round(want, 5)):
            rounded_apart.append(seed)
    assert not differing, f"{len(differing)} of {len(SEEDS)} differ from scikit-learn:\n" + "\n".join(
        differing[:5]
    )
    assert not rounded_apart, f"seeds {rounded_apart} round apart from MLE-bench"
