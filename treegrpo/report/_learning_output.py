"""Markdown and one-line renderings of the learning curves and the train-vs-control comparison."""

from __future__ import annotations

from treegrpo.report._compare import Comparison, Difference
from treegrpo.report._learning import CurveRow
from treegrpo.report._stats import Estimate

SEARCH_NOTE = (
    "Improve and debug steps pick their parents among the round's best nodes, so tree search "
    "alone raises later steps and rounds, with or without training: a rising curve of one run "
    "is not evidence of learning. Only a paired no-train control (`treegrpo run CONFIG "
    "--control`, `treegrpo report RUN --control CONTROL`) separates learning from search."
)


def est(e: Estimate, fmt: str = ".3f") -> str:
    if e.value is None:
        return "–"
    if e.lo is None:
        return format(e.value, fmt)
    return f"{e.value:{fmt}} [{e.lo:{fmt}}, {e.hi:{fmt}}]"


def _table(head: list[str], rows: list[list[str]]) -> list[str]:
    return ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)] + [
        "| " + " | ".join(r) + " |" for r in rows
    ]


def curve_table(rows: list[CurveRow], axis: str) -> list[str]:
    return _table(
        [
            "task",
            axis,
            "nodes",
            "groups",
            "failed share",
            "mean oriented (valid)",
            "median oriented (valid)",
            "sample score",
        ],
        [
            [
                r.task,
                str(r.x),
                str(r.nodes),
                str(r.groups),
                est(r.failed_share, ".2f"),
                est(r.mean_oriented, ".4f"),
                est(r.median_oriented, ".4f"),
                est(r.score),
            ]
            for r in rows
        ],
    )


def curves_markdown(curves: dict[str, dict[str, list[CurveRow]]], plots: dict[str, str]) -> list[str]:
    out = [
        "## Learning curves",
        "",
        SEARCH_NOTE,
        "",
        "Each cell: the value and its 95 % bootstrap interval (sibling groups resampled within each task). "
        "Raw metrics are not pooled over tasks; the sample score is: a node's mid-rank against the task's "
        "round-1 nodes (failures below every valid node), so round 1 averages 0.5.",
        "",
    ]
    for title, name in plots.items():
        out += [f"![{title}]({name})", ""]
    for run_id, by_axis in curves.items():
        for axis, rows in by_axis.items():
            if rows:
                out += [f"### {run_id}: by {axis}", ""] + curve_table(rows, axis) + [""]
    return out


def _diff_row(name: str, d: Difference) -> list[str]:
    f = lambda x: "–" if x is None else f"{x:.3f}"  # noqa: E731
    return [name, f(d.train), f(d.control), est(d.difference, "+.3f"), d.verdict, str(d.groups)]


def comparison_markdown(c: Comparison) -> list[str]:
    r1 = c.round1
    share = "–" if r1.identical_share is None else f"{100 * r1.identical_share:.0f}%"
    out = [
        "## Learning: train vs control",
        "",
        f"Train `{c.train_run}` vs control `{c.control_run}` (same seed, tasks, prompts and tree; no "
        f"training). Verdict: **{c.verdict}**. Compared rounds: {', '.join(map(str, c.late_rounds)) or '–'}.",
        "",
    ]
    out += _table(
        ["", "train score", "control score", "difference [95% CI]", "verdict", "paired groups"],
        [_diff_row("pooled", c.pooled)] + [_diff_row(t, d) for t, d in c.tasks.items()],
    ) + [""]
    out += [
        f"Round-1 agreement (before any update): {share} of round-1 completions token-identical; "
        f"round-1 score difference {est(r1.difference, '+.3f')} — "
        f"{'ok' if r1.ok else 'NOT OK: the arms did not start from the same conditions'}.",
        "",
        "- difference: mean sample score of the compared rounds, train − control; interval: 2000 "
        "resamples of sibling groups paired by place in the tree (task, round, step), within each task.",
        "- verdict: `learned` when the interval lies above 0, `worse` when below, else `no evidence`.",
        "",
    ]
    return out


def verdict_line(c: Comparison) -> str:
    d = c.pooled.difference
    ci = "–" if d.lo is None else f"[{d.lo:+.3f}, {d.hi:+.3f}]"
    diff = "–" if d.value is None else f"{d.value:+.3f}"
    agreement = "ok" if c.round1.ok else "NOT ok"
    return f"verdict: {c.verdict}   difference {diff}   ci95 {ci}   (round 1 agreement {agreement})"
