"""When the `mlebench` package is importable, its own grader scores MLE-bench competitions.

The real package cannot be installed here (no download of it or its data), so this test puts a
stand-in with MLE-bench's API shape (`registry.set_data_dir(root).get_competition(id)`,
`competition.grader.grade_fn`, `grader.is_lower_better(leaderboard)`, `mlebench.data.get_leaderboard`,
`mlebench.utils.load_answers`) on sys.path and checks our adapter drives it.
"""

from __future__ import annotations

import sys
import textwrap

import pytest

from services.grader.tasks import Metric, TaskRegistry, grade_submission, mlebench_available

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
                prepared = self.data_dir / cid / "prepared"
                return Competition(cid, "Toy Regression", "Predict value.", Grader(grade),
                                   prepared / "private" / "test.csv", prepared / "public", prepared / "private")

        registry = Registry()
    """,
}


@pytest.fixture
def standin(tmp_path, monkeypatch):
    pkg = tmp_path / "site" / "mlebench"
    pkg.mkdir(parents=True)
    for name, body in STANDIN.items():
        (pkg / name).write_text(textwrap.dedent(body))
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    for mod in [m for m in sys.modules if m == "mlebench" or m.startswith("mlebench.")]:
        monkeypatch.delitem(sys.modules, mod)
    yield
    for mod in [m for m in sys.modules if m == "mlebench" or m.startswith("mlebench.")]:
        sys.modules.pop(mod, None)


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
