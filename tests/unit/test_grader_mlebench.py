"""When the `mlebench` package is importable, its own grader scores MLE-bench competitions.

The real package cannot be installed here (no download of it or its data), so this test puts a
stand-in with MLE-bench's API shape (`registry.set_data_dir(root).get_competition(id)`,
`competition.grader.grade_fn`, `grader.is_lower_better(leaderboard)`, `mlebench.data.get_leaderboard`,
`mlebench.utils.load_answers`) on sys.path and checks our adapter drives it.
"""

from __future__ import annotations

import logging
import sys
import textwrap

import pytest

from treegrpo.tasks import (
    Metric,
    TaskRegistry,
    UnsupportedCompetition,
    grade_submission,
    mlebench_available,
)

STANDIN = {
    "__init__.py": "",
    "grade_helpers.py": """
        class InvalidSubmissionError(Exception):
            pass

        class Grader:
            def __init__(self, grade_fn):
                self.grade_fn = grade_fn
            def is_lower_better(self, leaderboard):
                return leaderboard[0] < leaderboard[-1]
    """,
    "utils.py": """
        import pandas as pd
        def load_answers(path):
            return pd.read_csv(path)
    """,
    "data.py": """
        def get_leaderboard(competition):
            return [0.1, 0.5, 0.9]   # ascending scores: lower is better
    """,
    "registry.py": """
        from dataclasses import dataclass
        from pathlib import Path
        from mlebench.grade_helpers import Grader, InvalidSubmissionError

        def grade(submission, answers):
            if list(submission.columns) != ["id", "value"]:
                raise InvalidSubmissionError("Submission must have columns id, value")
            merged = submission.merge(answers, on="id", suffixes=("", "_true"))
            return float(((merged["value"] - merged["value_true"]) ** 2).mean()) + 1e-9

        def grade_tie(submission, answers):
            import numpy as np
            return np.float64(0.690625)   # a tie at the 6th decimal, as a numpy float (like np.mean)

        @dataclass
        class Competition:
            id: str
            name: str
            description: str
            grader: Grader
            answers: Path
            public_dir: Path
            private_dir: Path

        class Registry:
            def __init__(self, data_dir=Path(".")):
                self.data_dir = Path(data_dir)
            def set_data_dir(self, d):
                return Registry(d)
            def get_competition(self, cid):
                if cid == "aerial-cactus-identification":
                    import tensorflow_not_installed  # noqa: F401  (a competition module's own import)
                prepared = self.data_dir / cid / "prepared"
                return Competition(cid, "Toy Regression", "Predict value.",
                                   Grader(grade_tie if cid == "toy-tie" else grade),
                                   prepared / "private" / "test.csv", prepared / "public",
                                   prepared / "private")

        registry = Registry()
    """,
}


def _install(tmp_path, monkeypatch, files: dict[str, str]):
    pkg = tmp_path / "site" / "mlebench"
    pkg.mkdir(parents=True)
    for name, body in files.items():
        (pkg / name).write_text(textwrap.dedent(body))
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    for mod in [m for m in sys.modules if m == "mlebench" or m.startswith("mlebench.")]:
        monkeypatch.delitem(sys.modules, mod)


def _uninstall():
    for mod in [m for m in sys.modules if m == "mlebench" or m.startswith("mlebench.")]:
        sys.modules.pop(mod, None)


@pytest.fixture
def standin(tmp_path, monkeypatch):
    _install(tmp_path, monkeypatch, STANDIN)
    yield
    _uninstall()


@pytest.fixture
def broken_standin(tmp_path, monkeypatch):
    """mlebench is installed, but one of its own dependencies is not (as appdirs or py7zr can be)."""
    _install(
        tmp_path,
        monkeypatch,
        {**STANDIN, "utils.py": "import py7zr_not_installed\n" + textwrap.dedent(STANDIN["utils.py"])},
    )
    yield
    _uninstall()


def data_root(tmp_path, competition: str, answers: str):
    prepared = tmp_path / "data" / competition / "prepared"
    (prepared / "public").mkdir(parents=True)
    (prepared / "private").mkdir()
    (prepared / "private" / "test.csv").write_text(answers)
    return tmp_path / "data"


CACTUS = "id,has_cactus\na.jpg,1\nb.jpg,0\nc.jpg,1\nd.jpg,0\n"
CACTUS_SUBMISSION = b"id,has_cactus\na.jpg,0.9\nb.jpg,0.2\nc.jpg,0.25\nd.jpg,0.3\n"  # AUC 3/4


def test_installed_mlebench_grades_any_competition_of_a_data_root(standin, tmp_path):
    root = tmp_path / "data"
    prepared = root / "toy-regression" / "prepared"
    (prepared / "public").mkdir(parents=True)
    (prepared / "private").mkdir()
    (prepared / "private" / "test.csv").write_text("id,value\n1,0.0\n2,1.0\n")
    assert mlebench_available()
    task = TaskRegistry(tmp_path / "home", [root]).get("toy-regression")
    assert task.metric is Metric.MLEBENCH and task.lower_is_better and task.name == "Toy Regression"
    assert task.public_dir == prepared / "public" and task.description == "Predict value."
    good = grade_submission(task, b"id,value\n2,1.5\n1,0.5\n")
    assert good.status == "ok" and good.test_metric == 0.25 and good.oriented == -0.25  # rounded to 5 places
    bad = grade_submission(task, b"id,guess\n1,0.5\n2,1.5\n")
    assert bad.status == "invalid_submission"
    assert bad.grade_error == "InvalidSubmissionError: Submission must have columns id, value"


def test_the_grade_functions_raw_value_is_rounded_as_mle_benchs_grader_does(standin, tmp_path):
    root = data_root(tmp_path, "toy-tie", "id,value\n1,0.0\n")
    task = TaskRegistry(tmp_path / "home", [root]).get("toy-tie")
    # np.float64(0.690625) rounds to 0.69062 by numpy's rule; float() first would give 0.69063
    assert grade_submission(task, b"id,value\n1,0.5\n").test_metric == 0.69062


def test_an_mlebench_whose_own_dependencies_do_not_import_gives_way_to_the_built_in_graders(
    broken_standin, tmp_path, caplog
):
    root = data_root(tmp_path, "aerial-cactus-identification", CACTUS)
    (root / "toy-regression" / "prepared" / "public").mkdir(parents=True)
    with caplog.at_level(logging.WARNING):
        assert not mlebench_available()
        task = TaskRegistry(tmp_path / "home", [root]).get("aerial-cactus-identification")
    assert "py7zr_not_installed" in caplog.text and "built-in graders" in caplog.text
    assert task.metric is Metric.ROC_AUC and task.source == "mlebench"
    assert grade_submission(task, CACTUS_SUBMISSION).test_metric == 0.75
    with pytest.raises(UnsupportedCompetition, match="does not import"):
        TaskRegistry(tmp_path / "home", [root]).get("toy-regression")


def test_a_competition_mlebench_cannot_load_falls_back_to_its_built_in_grader(standin, tmp_path, caplog):
    root = data_root(tmp_path, "aerial-cactus-identification", CACTUS)
    with caplog.at_level(logging.WARNING):
        task = TaskRegistry(tmp_path / "home", [root]).get("aerial-cactus-identification")
    assert mlebench_available() and task.metric is Metric.ROC_AUC
    assert "tensorflow_not_installed" in caplog.text and "built-in grader" in caplog.text
    assert grade_submission(task, CACTUS_SUBMISSION).test_metric == 0.75
