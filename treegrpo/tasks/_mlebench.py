"""MLE-bench data roots: `<root>/<competition>/prepared/public|private`, plus the competition's
`config.yaml` and description.

When the `mlebench` package is importable, a competition is graded by MLE-bench's own grade
function (its registry pointed at this root) and its direction comes from its leaderboard.
Otherwise (not installed, or installed but its own imports fail: a missing dependency, kaggle
without credentials) only the four competitions the seed used are gradable, by our
implementations of the same rules (`COMPETITIONS`), with a warning saying why.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import logging
from dataclasses import replace
from pathlib import Path
from typing import Any

import yaml

from treegrpo.tasks._submission import InvalidSubmission
from treegrpo.tasks._task import (
    COMPETITIONS,
    CompetitionSpec,
    Metric,
    Task,
    Validation,
    task_from_spec,
)

log = logging.getLogger(__name__)


class UnsupportedCompetition(LookupError):
    """A competition exists in a data root but nothing here can grade it."""


# what grading needs from it (mlebench.data only gives the direction, and its failure is tolerated)
_MODULES = ("mlebench.registry", "mlebench.utils")
_warned: set[str] = set()


def _warn_once(message: str) -> None:
    if message not in _warned:
        _warned.add(message)
        log.warning(message)


def mlebench_problem() -> str | None:
    """Why the `mlebench` package cannot grade here, or None when it can."""
    if importlib.util.find_spec("mlebench") is None:
        return "the mlebench package is not installed"
    for name in _MODULES:
        try:
            importlib.import_module(name)
        except Exception as exc:  # importing runs its dependencies' code (kaggle raises OSError, ...)
            return (
                f"the mlebench package is installed but {name} does not import ({type(exc).__name__}: {exc})"
            )
    return None


def mlebench_available() -> bool:
    """True when MLE-bench's own graders can be used. An installed package that does not import is
    warned about once and treated as absent: the built-in graders take over."""
    problem = mlebench_problem()
    if problem is not None and importlib.util.find_spec("mlebench") is not None:
        _warn_once(
            f"{problem}; MLE-bench competitions are graded by the built-in graders "
            f"({', '.join(sorted(COMPETITIONS))}) only"
        )
    return problem is None


def _config(comp_dir: Path) -> dict[str, Any]:
    path = comp_dir / "config.yaml"
    if not path.is_file():
        return {}
    data = yaml.safe_load(path.read_text()) or {}
    return data if isinstance(data, dict) else {}


def _description(root: Path, comp_dir: Path, config: dict[str, Any], fallback: str) -> str:
    candidates = [comp_dir / "description.md", comp_dir / "prepared" / "public" / "description.md"]
    if isinstance(config.get("description"), str):
        candidates += [root / config["description"], comp_dir / Path(config["description"]).name]
    for path in candidates:
        if path.is_file():
            return path.read_text()
    return fallback


def _answers_file(root: Path, competition: str, config: dict[str, Any], spec: CompetitionSpec) -> Path:
    rel = (config.get("dataset") or {}).get("answers")
    if isinstance(rel, str):
        path = root / rel
        if path.parts[-3:-1] == ("prepared", "private") or path.parent.name == "private":
            return path
    return root / competition / "prepared" / "private" / spec.answers_file


@functools.lru_cache(maxsize=32)
def _mlebench_competition(root: str, competition: str):
    from mlebench.registry import registry  # type: ignore[import-not-found]

    return registry.set_data_dir(Path(root)).get_competition(competition)


def _mlebench_task(root: Path, competition: str, comp_dir: Path, config: dict[str, Any]) -> Task:
    comp = _mlebench_competition(str(root), competition)
    spec = COMPETITIONS.get(competition)
    lower = spec.lower_is_better if spec else False
    try:
        from mlebench.data import get_leaderboard  # type: ignore[import-not-found]

        lower = bool(comp.grader.is_lower_better(get_leaderboard(comp)))
    except Exception as exc:  # no leaderboard shipped: keep what we know
        log.warning(
            "mlebench leaderboard of %s unavailable (%s); direction %s",
            competition,
            exc,
            "lower" if lower else "higher",
        )
    cols: tuple[str, ...] = spec.submission_columns if spec else ()
    id_col = spec.id_column if spec else ""
    return Task(
        id=competition,
        name=comp.name,
        description=_description(root, comp_dir, config, comp.description),
        public_dir=comp.public_dir,
        private_dir=comp.private_dir,
        answers_path=Path(comp.answers),
        metric=Metric.MLEBENCH,
        lower_is_better=lower,
        id_column=id_col,
        submission_columns=cols,
        validation=spec.validation if spec else Validation(exact_columns=False, probabilities=False),
        source="mlebench",
        mirrors=competition,
    )


def read_competition(root: Path, competition: str, use_mlebench: bool | None = None) -> Task | None:
    """The Task of `competition` in an MLE-bench data root, or None when the root lacks it."""
    comp_dir = root / competition
    public, private = comp_dir / "prepared" / "public", comp_dir / "prepared" / "private"
    if not public.is_dir():
        return None
    config = _config(comp_dir)
    problem = None
    if use_mlebench if use_mlebench is not None else mlebench_available():
        try:
            return _mlebench_task(root, competition, comp_dir, config)
        except ImportError as exc:  # this competition's own grade/prepare module needs a missing package
            problem = f"mlebench cannot load {competition} ({type(exc).__name__}: {exc})"
            if competition in COMPETITIONS:
                _warn_once(f"{problem}; grading it with the built-in grader")
    spec = COMPETITIONS.get(competition)
    if spec is None:
        raise UnsupportedCompetition(
            f"{competition} in {root}: "
            f"{problem or mlebench_problem() or 'mlebench was not asked for'} and only "
            f"{sorted(COMPETITIONS)} have built-in graders (a working mlebench install grades the rest)"
        )
    name = str(config.get("name") or competition)
    fallback = (
        f"# {name}\n\nPredict {', '.join(spec.target_columns)} for each {spec.id_column} in the test set.\n"
    )
    answers = _answers_file(root, competition, config, spec)
    task = task_from_spec(
        competition, name, _description(root, comp_dir, config, fallback), public, private, spec, "mlebench"
    )
    return task if answers == task.answers_path else replace(task, answers_path=answers)


def list_competitions(root: Path) -> list[str]:
    if not root.is_dir():
        return []
    return sorted(p.name for p in root.iterdir() if (p / "prepared" / "public").is_dir())


def mlebench_score(task: Task, frame):
    """Score with MLE-bench's own grade function, its value returned as it is (`grader_round` rounds
    it as MLE-bench does); any exception it raises means invalid, as in MLE-bench, but here the
    reason is kept."""
    root = task.private_dir.parent.parent.parent
    comp = _mlebench_competition(str(root), task.mirrors)
    answers = _mlebench_answers(str(comp.answers))
    try:
        return comp.grader.grade_fn(frame, answers)
    except Exception as exc:  # MLE-bench treats every grade_fn exception as an invalid submission
        raise InvalidSubmission(f"{type(exc).__name__}: {exc}") from exc


@functools.lru_cache(maxsize=16)
def _mlebench_answers(path: str):
    from mlebench.utils import load_answers  # type: ignore[import-not-found]

    return load_answers(Path(path))
