"""The report's three renderings of the same numbers: side-by-side rows, Markdown, rich, JSON."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from rich.console import Console
from rich.table import Table

from treegrpo.archive import PHASES, STATUSES
from treegrpo.report._data import LOAD_LINE
from treegrpo.report._metrics import Ratio, RunMetrics

Row = tuple[str, list[str]]


def _pct(x: float | None) -> str:
    return "–" if x is None else f"{100 * x:.1f}%"


def _ratio(r: Ratio) -> str:
    return "–" if not r.n else f"{r.k}/{r.n} ({_pct(r.rate)})"


def _num(x: float | None, fmt: str = ".1f") -> str:
    return "–" if x is None else format(x, fmt)


def summary_rows(runs: Sequence[RunMetrics]) -> list[Row]:
    rows: list[Row] = [
        ("schema", [m.schema for m in runs]),
        ("tasks", [", ".join(m.tasks) for m in runs]),
        ("nodes", [str(m.nodes) for m in runs]),
    ]
    statuses = list(STATUSES) + sorted({s for m in runs for s in m.statuses} - set(STATUSES))
    rows += [(f"status {s}", [str(m.statuses.get(s, 0)) for m in runs]) for s in statuses]
    # beside the six, never among them: nodes our side failed to execute or grade (masked)
    rows.append(("infrastructure (masked, not in nodes)", [str(m.infrastructure) for m in runs]))
    if any(m.retried for m in runs):  # only runs resumed with --retry-masked have any
        rows.append(("retried after infrastructure faults (--retry-masked)", [str(m.retried) for m in runs]))
    rows += [
        ("crash rate", [_pct(m.crash_rate) for m in runs]),
        ("valid rate", [_pct(m.valid_rate) for m in runs]),
        ("improve keeps a valid parent valid", [_ratio(m.improve_keeps_valid) for m in runs]),
        ("debug fixes its parent", [_ratio(m.debug_fixes_parent) for m in runs]),
        ("GPU declared", [str(m.gpu.declared) if m.gpu else "n/a (no gate)" for m in runs]),
        ("GpuIdleError", [str(m.gpu.gpu_idle_errors) if m.gpu else "n/a" for m in runs]),
        ("malformed declarations", [str(m.gpu.malformed) if m.gpu else "n/a" for m in runs]),
        ("training steps logged", [str(m.steps) for m in runs]),
        ("median step total_s", [_num(m.total_s_median) for m in runs]),
        ("per-node step cost (median s)", [_num(m.node_cost_s, ".2f") for m in runs]),
    ]
    est = runs[0].signal.estimator if runs else ""
    rows += [
        (
            f"groups with signal ({est})",
            [f"{m.signal.with_signal}/{m.signal.groups} ({_pct(m.signal.share)})" for m in runs],
        ),
        ("partial groups (not counted)", [str(m.signal.partial_groups) for m in runs]),
        ("groups dropped: infrastructure (not counted)", [str(m.signal.dropped_groups) for m in runs]),
        ("GPU-hours (Σ total_s × GPUs)", [_num(m.signal.gpu_hours, ".2f") for m in runs]),
        ("signal groups trained / GPU-hour", [_num(m.signal.per_gpu_hour, ".2f") for m in runs]),
        (
            "zero-variance groups re-spent (decided)",
            [f"{m.respend.groups}/{m.respend.decisions}" for m in runs],
        ),
        ("re-spent: new siblings, with signal", [_respent(m) for m in runs]),
        ("re-spent tokens generated / reserved", [_respent_tokens(m) for m in runs]),
        ("groups skipped by the learner: no signal", [str(m.respend.skipped_no_signal) for m in runs]),
        ("policy entropy (first → last step)", [_entropy(m.entropy) for m in runs]),
    ]
    return rows


def _respent(m: RunMetrics) -> str:
    r = m.respend
    return f"{r.siblings} siblings, {r.with_signal}/{r.groups} groups" if r.groups else "–"


def _respent_tokens(m: RunMetrics) -> str:
    r = m.respend
    return f"{r.tokens_generated}/{r.tokens_reserved}" if r.groups else "–"


def _entropy(values: list[float]) -> str:
    return f"{values[0]:.3f} → {values[-1]:.3f}" if values else "–"


def phase_rows(runs: Sequence[RunMetrics]) -> list[Row]:
    rows = []
    for p in PHASES:
        if any(p in m.phases for m in runs):
            rows.append(
                (
                    p,
                    [
                        f"{m.phases[p].median_s:.1f}s ({_pct(m.phases[p].share)})" if p in m.phases else "–"
                        for m in runs
                    ],
                )
            )
    return rows


def round_rows(m: RunMetrics) -> list[list[str]]:
    return [
        [
            r.task,
            str(r.round),
            str(r.nodes),
            str(r.valid),
            _pct(r.crash_rate),
            _num(r.best_test_metric, ".5f"),
            "summary" if r.from_summary else "nodes (no summary)",
        ]
        for r in m.rounds
    ]


def _md_table(head: list[str], rows: list[list[str]]) -> list[str]:
    esc = [[c.replace("|", "\\|") for c in row] for row in rows]
    return ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)] + [
        "| " + " | ".join(r) + " |" for r in esc
    ]


def markdown(runs: Sequence[RunMetrics], plots: dict[str, str], gpus: int, estimator: str) -> str:
    ids = [m.run_id for m in runs]
    out = [
        "# treegrpo capability report",
        "",
        "Runs: " + ", ".join(f"`{m.run_id}` ({m.source})" for m in runs),
        "",
    ]
    out += [f"> **`{m.run_id}`: {LOAD_LINE}**\n" for m in runs if m.load_run]
    out += (
        ["## Side by side", ""]
        + _md_table(["measure", *ids], [[k, *v] for k, v in summary_rows(runs)])
        + [""]
    )
    if any(m.phases for m in runs):
        out += ["## Per-step phases (median, share of Σ total_s)", ""]
        out += _md_table(["phase", *ids], [[k, *v] for k, v in phase_rows(runs)]) + [""]
    for m in runs:
        if m.gpu and m.gpu.miss_reasons:
            out += [
                f"Declaration misses in `{m.run_id}`: "
                + "; ".join(f"{k!r}: {v}" for k, v in m.gpu.miss_reasons.items()),
                "",
            ]
    out += ["## Rounds", ""]
    for m in runs:
        out += [f"### {m.run_id}", ""]
        out += _md_table(
            ["task", "round", "nodes", "valid", "crash rate", "best test metric", "from"], round_rows(m)
        ) + [""]
    out += ["## Plots", ""] + [f"![{title}]({name})" for title, name in plots.items()] + [""]
    out += [
        "## Definitions",
        "",
        "- crash rate: nodes with status `crashed` / all nodes; valid rate: status `ok` / all nodes.",
        "- improve keeps a valid parent valid: `improve` nodes whose parent (followed by `parent_id`, every "
        "round incl. partial ones) is `ok`, counted `ok`; "
        "debug fixes its parent: `debug` nodes whose parent is not `ok`, counted `ok`.",
        "- GPU declared: a parsed `[tool.resources]` with gpu ≥ 1; GpuIdleError: `exc_type`; "
        "malformed: `decl_malformed`.",
        f"- learning signal: a complete sibling group has a non-zero advantage under `{estimator}`; "
        "groups of a round that stopped mid-group are listed as partial and not counted.",
        f"- GPU-hours = Σ timing `total_s` × {gpus} GPU(s) / 3600; "
        "signal groups per GPU-hour counts the groups that step trained on "
        "(the learner's `sibling_groups`, or for seed runs the round whose number is the step).",
        "- per-node step cost: median over steps of `total_s` / nodes that step trained on.",
        "",
    ]
    problems = [p for m in runs for p in m.problems]
    if problems:
        out += ["## Input problems (skipped)", ""] + [f"- {p}" for p in problems[:200]] + [""]
    return "\n".join(out)


def print_rich(runs: Sequence[RunMetrics], console: Console) -> None:
    ids = [m.run_id for m in runs]
    for m in runs:
        if m.load_run:
            console.print(f"[bold yellow]{m.run_id}: {LOAD_LINE}[/]", soft_wrap=True)
    for title, rows in (
        ("Capability", summary_rows(runs)),
        ("Per-step phases (median, share)", phase_rows(runs)),
    ):
        if not rows:
            continue
        t = Table(title=title)
        t.add_column("measure")
        for i in ids:
            t.add_column(i, justify="right")
        for k, v in rows:
            t.add_row(k, *v)
        console.print(t)
    for m in runs:
        t = Table(title=f"{m.run_id}: rounds")
        for c in ("task", "round", "nodes", "valid", "crash rate", "best test metric", "from"):
            t.add_column(c)
        for row in round_rows(m):
            t.add_row(*row)
        console.print(t)


def as_json(runs: Sequence[RunMetrics], plots: dict[str, str], gpus: int, estimator: str) -> dict:
    def one(m: RunMetrics) -> dict:
        d = dataclasses.asdict(m)
        d["improve_keeps_valid"]["rate"] = m.improve_keeps_valid.rate
        d["debug_fixes_parent"]["rate"] = m.debug_fixes_parent.rate
        d["signal"]["share"] = m.signal.share
        return d

    return {"estimator": estimator, "gpus": gpus, "plots": plots, "runs": [one(m) for m in runs]}
