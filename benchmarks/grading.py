"""Grading a 2,500-row submission: median wall time per competition metric (target < 50 ms).

Baselines, measured in the same run on the same file, interleaved with our grader so machine load
hits all alike: (1) a plain `pandas.read_csv` of the submission (the floor any CSV-based grader
pays); (2) MLE-bench's way: read both CSVs, sort by id, call the scikit-learn metric (no validation
messages). Each task uses the rules of one of the four competitions, with 2,500 synthetic test rows.

    .venv/bin/python benchmarks/grading.py [--rows 2500] [--repeats 30]
"""

from __future__ import annotations

import argparse
import platform
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd
from rich.console import Console
from rich.table import Table
from sklearn.metrics import log_loss, roc_auc_score

from treegrpo.tasks import COMPETITIONS, grade_submission, task_from_spec


def make_case(root: Path, competition: str, rows: int, rng: np.random.Generator):
    """Answers and a valid, imperfect submission of `rows` test rows for one competition."""
    spec = COMPETITIONS[competition]
    ids = (
        np.arange(1, rows + 1)
        if spec.id_column == "id" and competition.startswith("dogs")
        else [f"t{v:07d}" for v in range(rows)]
    )
    k = len(spec.target_columns)
    labels = rng.integers(0, k if k > 1 else 2, rows)
    truth = np.eye(max(k, 2))[labels][:, :k] if k > 1 else labels[:, None]
    pred = np.clip(0.3 * truth + rng.uniform(0, 0.7, truth.shape), 0, 1)
    if spec.validation.rows_sum_to_one:
        pred = pred / pred.sum(axis=1, keepdims=True)
    answers = pd.DataFrame(truth, columns=list(spec.target_columns)).astype(int)
    answers.insert(0, spec.id_column, ids)
    sub = pd.DataFrame(pred, columns=list(spec.target_columns))
    sub.insert(0, spec.id_column, ids)
    private, public = root / competition / "private", root / competition / "public"
    private.mkdir(parents=True)
    public.mkdir(parents=True)
    answers.to_csv(private / spec.answers_file, index=False)
    path = root / competition / "submission.csv"
    sub.sample(frac=1.0, random_state=0).to_csv(path, index=False)
    task = task_from_spec(competition, competition, "", public, private, spec, "mlebench")
    return task, path


def sklearn_grade(task, path: Path) -> float:
    """The MLE-bench grade functions' work: read, sort by id, scikit-learn metric."""
    sub = pd.read_csv(path).sort_values(task.id_column)
    ans = pd.read_csv(task.answers_path).sort_values(task.id_column)
    cols = list(task.target_columns)
    y, p = ans[cols].to_numpy(), sub[cols].to_numpy()
    if task.metric.value.endswith("log_loss"):
        return log_loss(y if len(cols) > 1 else y[:, 0], p if len(cols) > 1 else p[:, 0])
    return float(np.mean([roc_auc_score(y[:, j], p[:, j]) for j in range(len(cols))]))


def interleaved(fns, repeats: int) -> list[list[float]]:
    """Time each function once per round, round after round: load affects all alike."""
    out: list[list[float]] = [[] for _ in fns]
    for _ in range(repeats):
        for times, fn in zip(out, fns, strict=True):
            start = time.perf_counter()
            fn()
            times.append(time.perf_counter() - start)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=2500)
    ap.add_argument("--repeats", type=int, default=30)
    ap.add_argument("--plot", type=Path, default=None, help="write a bar chart of the medians here")
    args = ap.parse_args()
    console = Console(width=160)
    rng = np.random.default_rng(0)
    table = Table(
        title=f"grading a {args.rows}-row submission, median of {args.repeats} "
        f"({platform.node()}, {platform.processor() or platform.machine()})"
    )
    for col in (
        "competition",
        "grade ms",
        "grade p90 ms",
        "read_csv ms",
        "mle-bench way ms",
        "grade / read_csv",
        "grade / mle-bench way",
        "score",
    ):
        table.add_column(col)
    medians: dict[str, tuple[float, float, float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for competition in COMPETITIONS:
            task, path = make_case(Path(tmp), competition, args.rows, rng)
            result = grade_submission(task, path)  # warm: answers cached, as in the service
            assert result.status == "ok", result.grade_error
            assert round(sklearn_grade(task, path), 5) == result.test_metric
            grade, base, mle = interleaved(
                [
                    lambda: grade_submission(task, path),  # noqa: B023
                    lambda: pd.read_csv(path),  # noqa: B023
                    lambda: sklearn_grade(task, path),  # noqa: B023
                ],
                args.repeats,
            )  # noqa: B023
            g, b, m = (statistics.median(x) for x in (grade, base, mle))
            medians[competition] = (g, b, m)
            p90 = sorted(grade)[int(0.9 * (len(grade) - 1))]
            table.add_row(
                competition,
                f"{g * 1e3:.1f}",
                f"{p90 * 1e3:.1f}",
                f"{b * 1e3:.1f}",
                f"{m * 1e3:.1f}",
                f"{g / b:.1f}x",
                f"{g / m:.2f}x",
                f"{result.test_metric}",
            )
    console.print(table)
    if args.plot:
        plot(medians, args.rows, args.plot)


def plot(medians: dict[str, tuple[float, float, float]], rows: int, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 3.6))
    x = np.arange(len(medians))
    for k, (label, colour) in enumerate(
        [
            ("grade_submission", "#4c72b0"),
            ("pandas.read_csv", "#999999"),
            ("MLE-bench way (pandas + sklearn)", "#dd8452"),
        ]
    ):
        ax.bar(x + (k - 1) * 0.27, [v[k] * 1e3 for v in medians.values()], 0.27, label=label, color=colour)
    ax.axhline(50, color="red", lw=1, ls="--", label="target 50 ms")
    ax.set_xticks(x, [c.split("-")[0] for c in medians])
    ax.set_ylabel("median ms")
    ax.set_title(f"grading a {rows}-row submission")
    ax.legend(fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)


if __name__ == "__main__":
    main()
