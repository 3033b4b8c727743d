"""Build the report: load runs (bus or seed-format root), compute, write Markdown + JSON + PNGs and
the run explorer (`report.html`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import orjson

from treegrpo.advantages import ESTIMATORS
from treegrpo.report import _learning_plots, _plots
from treegrpo.report._compare import Comparison, compare
from treegrpo.report._data import RunData, load_from_bus, load_from_root
from treegrpo.report._explorer import payload
from treegrpo.report._html import write_html
from treegrpo.report._learning import CurveRow, curves, scorers
from treegrpo.report._learning_output import comparison_markdown, curves_markdown, verdict_line
from treegrpo.report._metrics import RunMetrics, compute
from treegrpo.report._output import as_json, markdown
from treegrpo.report._speed import SpeedTable, speed_markdown, speed_table

NOT_APPLICABLE = "learning vs control: not applicable: load run (scores come from completion bytes)"


@dataclass
class Report:
    runs: list[RunMetrics]
    out_dir: Path
    markdown_path: Path
    json_path: Path
    plots: dict[str, str] = field(default_factory=dict)
    data: dict = field(default_factory=dict)
    comparison: Comparison | None = None
    html_path: Path | None = None
    speed: SpeedTable | None = None  # `--against`: the seed's speed table, runs[0] (A) against B
    learning_note: str = ""  # why no train-vs-control verdict was given (a load run)


async def load_runs(source, run_ids: Sequence[str]) -> list[RunData]:
    """`source` is a connected Bus, or the path of a seed-format root (or run directory)."""
    if isinstance(source, str | Path):
        runs = load_from_root(source)
        if not runs:
            raise LookupError(f"{source}: no run directories (round_N/ or timing.jsonl) found")
        if run_ids:
            wanted = set(run_ids)
            missing = wanted - {r.run_id for r in runs}
            if missing:
                raise LookupError(f"no run(s) {', '.join(sorted(missing))} under {source}")
            runs = [r for r in runs if r.run_id in wanted]
        return runs
    ids = list(run_ids) or await source.run_ids()
    if not ids:
        raise LookupError("no runs on the bus (no run.started event); give run ids or a seed-format root")
    return [await load_from_bus(source, rid) for rid in ids]


def _tree_round(data: RunData, round_: int | None) -> tuple[str, int] | None:
    keys = sorted({(r.round, r.exp_id) for r in data.records})
    if not keys:
        return None
    if round_ is not None:
        match = [k for k in keys if k[0] == round_]
        if not match:
            raise LookupError(f"run {data.run_id} has no round {round_}")
        return match[0][1], round_
    done = [k for k in keys if (k[1], k[0]) in data.summaries] or keys
    return done[-1][1], done[-1][0]


def _learning(
    runs: Sequence[RunData], control: RunData | None, late_from: int | None, min_difference: float, out: Path
) -> tuple[dict[str, dict[str, list[CurveRow]]], Comparison | None, dict[str, str]]:
    """Curves of every run (scored against the round 1 of all of them when paired with a control,
    else each against its own), the comparison with the control, and their plots."""
    arms = [*runs, control] if control is not None else list(runs)
    by_run = {d.run_id: (scorers(arms) if control is not None else scorers([d])) for d in arms}
    data = {
        d.run_id: {
            "round": curves(d, by_run[d.run_id], "round"),
            "version": curves(d, by_run[d.run_id], "version"),
        }
        for d in arms
    }
    plots = {}
    if any(c["round"] for c in data.values()):
        plots["Learning curves by round"] = _learning_plots.curves_grid(
            {k: c["round"] for k, c in data.items()},
            "round",
            out / "learning_curves.png",
            "Learning curves by round",
        ).name
    if any(c["version"] for c in data.values()):
        plots["Learning curves by policy version"] = _learning_plots.curves_grid(
            {k: c["version"] for k, c in data.items()},
            "policy version",
            out / "learning_by_version.png",
            "Learning curves by policy version",
        ).name
    comparison = None
    if control is not None and not (runs[0].load or control.load):  # a load run never learns
        comparison = compare(runs[0], control, late_from, min_difference=min_difference)
        plots["Train vs control"] = _learning_plots.vs_control(
            data[runs[0].run_id]["round"],
            data[control.run_id]["round"],
            comparison.late_rounds,
            verdict_line(comparison),
            out / "learning_vs_control.png",
        ).name
    return data, comparison, plots


def write_report(
    runs: Sequence[RunData],
    out_dir: str | Path,
    estimator: str = "grpo_valid_only",
    gpus: int = 1,
    tree_round: int | None = None,
    control: RunData | None = None,
    late_from: int | None = None,
    min_difference: float = 0.0,
    against: RunData | None = None,
    cold_steps: int = 1,
) -> Report:
    """`control`: a no-train run paired with `runs[0]` (same seed and tree): adds the comparison
    (never for a load run). `against`: a run B whose speed table against `runs[0]` (A) is added,
    its first `cold_steps` common steps left out."""
    if estimator not in ESTIMATORS:
        raise ValueError(f"unknown estimator {estimator!r}; one of {', '.join(ESTIMATORS)}")
    if control is not None and len(runs) != 1:
        raise ValueError("a control pairs with exactly one train run")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    curve_data, comparison, learning_plots = _learning(runs, control, late_from, min_difference, out)
    speed = speed_table(runs[0], against, cold_steps) if against is not None else None
    if against is not None and against.run_id not in {d.run_id for d in runs}:
        runs = [*runs, against]
    learning_note = NOT_APPLICABLE if control is not None and comparison is None else ""
    if control is not None:
        runs = [*runs, control]
    metrics = [compute(d, estimator, gpus) for d in runs]
    plots = {
        "Crash rate by round": _plots.crash_rate_by_round(metrics, out / "crash_rate_by_round.png").name,
        "Best test metric by round": _plots.best_metric_by_round(
            metrics, out / "best_metric_by_round.png"
        ).name,
    }
    if any(m.phases for m in metrics):
        plots["Per-step phases"] = _plots.phase_bars(metrics, out / "phases.png").name
    if runs and (which := _tree_round(runs[0], tree_round)):
        task, rnd = which
        recs = [r for r in runs[0].records if r.exp_id == task and r.round == rnd]
        name = f"tree_{runs[0].run_id}_round_{rnd}.png"
        plots[f"Tree of {runs[0].run_id} round {rnd} ({task})"] = _plots.round_tree(
            recs, f"{runs[0].run_id} · {task} · round {rnd}", out / name
        ).name
    md = out / "report.md"
    learning_md = (comparison_markdown(comparison) if comparison else []) + curves_markdown(
        curve_data, learning_plots
    )
    if learning_note:
        learning_md = ["## Learning vs control", "", f"**{learning_note}**", "", *learning_md]
    speed_md = speed_markdown(speed) if speed is not None else []
    md.write_text(markdown(metrics, plots, gpus, estimator) + "\n" + "\n".join(speed_md + learning_md))
    plots |= learning_plots
    data = as_json(metrics, plots, gpus, estimator)
    data["curves"] = {
        rid: {f"by_{axis}": [r.as_dict(axis) for r in rows] for axis, rows in c.items()}
        for rid, c in curve_data.items()
    }
    if comparison is not None:
        data["learning"] = comparison.as_dict()
    elif learning_note:
        data["learning"] = {"verdict": "not applicable: load run", "note": learning_note}
    data["load_runs"] = [d.run_id for d in runs if d.load]
    if speed is not None:
        data["speed"] = speed.as_dict()
    js = out / "report.json"
    js.write_bytes(orjson.dumps(data, option=orjson.OPT_INDENT_2 | orjson.OPT_APPEND_NEWLINE))
    page = payload(
        runs,
        metrics,
        estimator,
        data["curves"],
        data["learning"] if comparison is not None else None,
        verdict_line(comparison) if comparison is not None else "",
        speed,
        learning_note,
    )
    html = write_html(out / "report.html", page)
    return Report(metrics, out, md, js, plots, data, comparison, html, speed, learning_note)


async def build_report(
    source,
    run_ids: Sequence[str],
    out_dir: str | Path,
    estimator: str = "grpo_valid_only",
    gpus: int = 1,
    tree_round: int | None = None,
    control: str | None = None,
    late_from: int | None = None,
    min_difference: float = 0.0,
    against: str | None = None,
    cold_steps: int = 1,
) -> Report:
    """The in-process entry the runner calls at the end of a run (source: a Bus or a seed-format root);
    `control`: the id of the no-train run paired with the single run in `run_ids`; `against`: the id
    of the run B of the speed table (A: the single run in `run_ids`)."""
    runs = await load_runs(source, run_ids)
    ctl = (await load_runs(source, [control]))[0] if control else None
    vs = (await load_runs(source, [against]))[0] if against else None
    return write_report(
        runs, out_dir, estimator, gpus, tree_round, ctl, late_from, min_difference, vs, cold_steps
    )
