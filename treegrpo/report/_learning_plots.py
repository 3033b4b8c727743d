"""Plots of the learning curves: one panel per task × measure, a line (95 % band) per run."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.ticker import MaxNLocator  # noqa: E402

from treegrpo.report._learning import POOLED, CurveRow  # noqa: E402
from treegrpo.report._plots import save_figure  # noqa: E402

MEASURES = {
    "failed_share": "failed share",
    "mean_oriented": "mean oriented metric (valid)",
    "median_oriented": "median oriented metric (valid)",
    "score": "sample score (vs round 1)",
}


def _line(ax, rows: list[CurveRow], measure: str, label: str, style: str = "-") -> None:
    """One run's curve with its 95 % band; later runs dashed, so arms that agree stay visible."""
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    pts = [(r.x, getattr(r, measure)) for r in rows if getattr(r, measure).value is not None]
    if not pts:
        return
    xs = [x for x, _ in pts]
    (line,) = ax.plot(xs, [e.value for _, e in pts], marker="o", ls=style, label=label)
    band = [(x, e.lo, e.hi) for x, e in pts if e.lo is not None]
    if band:
        ax.fill_between(
            [b[0] for b in band],
            [b[1] for b in band],
            [b[2] for b in band],
            color=line.get_color(),
            alpha=0.15,
        )


def curves_grid(curves: dict[str, list[CurveRow]], axis: str, path: Path, title: str) -> Path:
    """Rows: each task, then pooled; columns: the four measures (raw metrics not pooled)."""
    tasks = sorted({r.task for rows in curves.values() for r in rows} - {POOLED}) + [POOLED]
    fig, axes = plt.subplots(
        len(tasks), len(MEASURES), figsize=(3.4 * len(MEASURES), 2.4 * len(tasks)), squeeze=False
    )
    for i, task in enumerate(tasks):
        for j, (measure, label) in enumerate(MEASURES.items()):
            ax = axes[i][j]
            if task == POOLED and measure in ("mean_oriented", "median_oriented"):
                ax.axis("off")
                continue
            for k, (run_id, rows) in enumerate(curves.items()):
                _line(ax, [r for r in rows if r.task == task], measure, run_id, "-" if k == 0 else "--")
            ax.set_title(f"{task} · {label}", fontsize=8)
            ax.set_xlabel(axis, fontsize=8)
            ax.tick_params(labelsize=7)
            if measure in ("failed_share", "score"):
                ax.set_ylim(-0.02, 1.02)
    axes[0][0].legend(fontsize=7)
    fig.suptitle(title, fontsize=10)
    return save_figure(fig, path)


def vs_control(
    train: list[CurveRow], control: list[CurveRow], late_rounds: list[int], headline: str, path: Path
) -> Path:
    """The sample score by round of both arms, per task and pooled; the compared rounds shaded."""
    tasks = sorted({r.task for r in train} - {POOLED}) + [POOLED]
    fig, axes = plt.subplots(1, len(tasks), figsize=(3.4 * len(tasks), 3.2), squeeze=False)
    for ax, task in zip(axes[0], tasks, strict=True):
        _line(ax, [r for r in train if r.task == task], "score", "train")
        _line(ax, [r for r in control if r.task == task], "score", "control (no training)", "--")
        if late_rounds:
            ax.axvspan(min(late_rounds) - 0.3, max(late_rounds) + 0.3, color="#dddddd", alpha=0.5, lw=0)
        ax.set(title=task, xlabel="round", ylim=(-0.02, 1.02))
        ax.set_ylabel("sample score", fontsize=8)
    axes[0][0].legend(fontsize=7)
    fig.suptitle(f"Train vs control — {headline} (shaded: the rounds compared)", fontsize=10)
    return save_figure(fig, path)
