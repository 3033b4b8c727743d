"""The report's PNG plots (matplotlib, Agg backend: no display needed)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from treegrpo.archive import PHASES, NodeRecord, walk  # noqa: E402
from treegrpo.events import Status
from treegrpo.report._metrics import RunMetrics  # noqa: E402

STATUS_COLORS = {
    Status.OK: "#2ca02c",
    Status.CRASHED: "#d62728",
    Status.TIMEOUT: "#ff7f0e",
    Status.NO_CODE: "#7f7f7f",
    Status.INVALID_SUBMISSION: "#9467bd",
    Status.NO_SUBMISSION: "#8c564b",
}
PHASE_COLORS = dict(
    zip(
        PHASES,
        ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22"],
        strict=False,
    )
)


def save_figure(fig, path: Path) -> Path:
    fig.tight_layout()
    fig.savefig(path, dpi=110, metadata={"Software": None})  # no version stamp: stable bytes
    plt.close(fig)
    return path


def crash_rate_by_round(runs: Sequence[RunMetrics], path: Path) -> Path:
    fig, ax = plt.subplots(figsize=(7, 4))
    for m in runs:
        pts = [(r.round, r.crash_rate) for r in m.rounds if r.crash_rate is not None]
        if pts:
            ax.plot(*zip(*pts, strict=False), marker="o", label=m.run_id)
    ax.set(
        xlabel="round", ylabel="crash rate (status crashed / nodes)", ylim=(0, 1), title="Crash rate by round"
    )
    ax.legend(fontsize=8)
    return save_figure(fig, path)


def phase_bars(runs: Sequence[RunMetrics], path: Path) -> Path:
    fig, ax = plt.subplots(figsize=(8.5, 0.6 * max(len(runs), 2) + 1.5))
    for y, m in enumerate(runs):
        left = 0.0
        for p in PHASES:
            if p in m.phases:
                w = m.phases[p].median_s
                ax.barh(y, w, left=left, color=PHASE_COLORS[p], label=p if y == 0 else None)
                left += w
    ax.set_yticks(range(len(runs)), [m.run_id for m in runs], fontsize=8)
    ax.set(xlabel="median seconds per training step", title="Per-step phases (medians, stacked)")
    handles, labels = ax.get_legend_handles_labels()
    seen = dict(zip(labels, handles, strict=False))
    ax.legend(seen.values(), seen.keys(), fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return save_figure(fig, path)


def best_metric_by_round(runs: Sequence[RunMetrics], path: Path) -> Path:
    fig, ax = plt.subplots(figsize=(7, 4))
    for m in runs:
        for task in m.tasks:
            pts = [
                (r.round, r.best_test_metric)
                for r in m.rounds
                if r.task == task and r.best_test_metric is not None
            ]
            if pts:
                ax.plot(*zip(*pts, strict=False), marker="o", label=f"{m.run_id} · {task}")
    ax.set(xlabel="round", ylabel="best test metric (raw)", title="Best test metric by round")
    ax.legend(fontsize=7)
    return save_figure(fig, path)


def round_tree(records: Sequence[NodeRecord], title: str, path: Path) -> Path:
    """One round's tree: x = expansion step, y = tree order; an edge from each parent to its children."""
    order = list(walk(records))
    y = {r.id: i for i, (_, r) in enumerate(order)}
    fig, ax = plt.subplots(figsize=(7, max(3.0, 0.12 * len(order) + 1.5)))
    by_id = {r.id: r for _, r in order}
    for _, r in order:
        if r.parent_id in y:
            parent = by_id[r.parent_id]
            ax.plot([parent.step, r.step], [y[parent.id], y[r.id]], color="#bbbbbb", lw=0.7, zorder=1)
    for status, color in STATUS_COLORS.items():
        pts = [(r.step, y[r.id]) for _, r in order if r.status == status]
        if pts:
            ax.scatter(*zip(*pts, strict=False), color=color, s=22, label=status, zorder=2)
    ax.invert_yaxis()
    ax.set(xlabel="expansion step", ylabel="node (tree order)", title=title)
    ax.set_xticks(sorted({r.step for r in records}))
    ax.legend(fontsize=7, loc="upper right")
    return save_figure(fig, path)
