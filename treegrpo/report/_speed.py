"""The seed's speed table from two runs: per-step phases side by side ("Speed: per-step phases
against the 27B"), the per-node cost, and the GPU busy share where a run records one.

Phases are read from the runs' timing lines (`TimingLine.phases_s`, the projection the run's
timing.jsonl is written from): the seed's phases (`PHASES`) in their order, then any further
phase a run records (e.g. the sampler's `sleep` and `wake`), then the step's `total`. Each value is
the median per step over the steps both runs logged, less the first `cold_steps` of them (default
1: a run's first step holds the engine's start, its compile and the kernels' first autotune, which
no later step pays; kept when no other step is common); the ratio is B / A. Per-node cost of a step
is its `total_s` / the nodes that step trained on (`step_nodes`: the members of its sibling groups,
the same count as the capability table's per-node step cost).
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from treegrpo.archive import PHASES
from treegrpo.report._data import RunData
from treegrpo.report._metrics import step_nodes


@dataclass(frozen=True)
class SpeedRow:
    name: str
    a: float | None
    b: float | None

    @property
    def ratio(self) -> float | None:  # B / A
        return self.b / self.a if self.a and self.b is not None else None


@dataclass(frozen=True)
class SpeedTable:
    run_a: str
    run_b: str
    steps: list[int]  # the steps both runs logged, less the cold ones
    phases: list[SpeedRow]  # ... then "total"
    per_node: SpeedRow
    gpu_busy: SpeedRow | None
    left_out: tuple[int, ...] = ()  # common steps left out as cold

    def as_dict(self) -> dict:
        row = lambda r: {"a": r.a, "b": r.b, "ratio_b_over_a": r.ratio}  # noqa: E731
        return {
            "run_a": self.run_a,
            "run_b": self.run_b,
            "steps": self.steps,
            "cold_steps_left_out": list(self.left_out),
            "phases": {r.name: row(r) for r in self.phases},
            "per_node_s": row(self.per_node),
            "gpu_busy_share": None if self.gpu_busy is None else row(self.gpu_busy),
        }


def _median(xs: list[float]) -> float | None:
    return statistics.median(xs) if xs else None


def _phase_names(a: RunData, b: RunData) -> list[str]:
    seen = {k for d in (a, b) for t in d.timing for k in t.phases_s}
    return [p for p in PHASES if p in seen] + sorted(seen - set(PHASES))


def speed_table(a: RunData, b: RunData, cold_steps: int = 1) -> SpeedTable:
    ta, tb = {t.step: t for t in a.timing}, {t.step: t for t in b.timing}
    common = sorted(set(ta) & set(tb))
    steps = common[cold_steps:] or common

    def med(timing: dict, name: str) -> float | None:
        if name == "total":
            return _median([timing[s].total_s for s in steps])
        return _median([timing[s].phases_s[name] for s in steps if name in timing[s].phases_s])

    rows = [SpeedRow(p, med(ta, p), med(tb, p)) for p in [*_phase_names(a, b), "total"]]

    def per_node(data: RunData, timing: dict) -> float | None:
        nodes = step_nodes(data)
        return _median([timing[s].total_s / nodes[s] for s in steps if nodes.get(s)])

    def busy(data: RunData) -> float | None:
        return _median([data.gpu_busy[s] for s in steps if s in data.gpu_busy])

    ba, bb = busy(a), busy(b)
    return SpeedTable(
        a.run_id,
        b.run_id,
        steps,
        rows,
        SpeedRow("per node", per_node(a, ta), per_node(b, tb)),
        None if ba is None and bb is None else SpeedRow("GPU busy share", ba, bb),
        tuple(s for s in common if s not in steps),
    )


def _s(x: float | None, fmt: str = ".1f") -> str:
    return "–" if x is None else f"{x:{fmt}}"


def _x(x: float | None) -> str:
    return "–" if x is None else f"{x:.2f}×"


def speed_rows(t: SpeedTable) -> list[list[str]]:
    """Rows of [measure, A, B, B/A] as printed (Markdown, terminal, explorer)."""
    rows = [[r.name, _s(r.a) + " s", _s(r.b) + " s", _x(r.ratio)] for r in t.phases]
    rows.append(
        [
            "per node (total / nodes trained)",
            _s(t.per_node.a, ".2f") + " s",
            _s(t.per_node.b, ".2f") + " s",
            _x(t.per_node.ratio),
        ]
    )
    if t.gpu_busy is not None:
        g = t.gpu_busy
        pct = lambda x: "–" if x is None else f"{100 * x:.1f}%"  # noqa: E731
        rows.append([g.name, pct(g.a), pct(g.b), _x(g.ratio)])
    return rows


def title(t: SpeedTable) -> str:
    return f"Speed: per-step phases, {t.run_a} (A) against {t.run_b} (B)"


def speed_markdown(t: SpeedTable) -> list[str]:
    head = ["phase (median per step)", f"A: {t.run_a}", f"B: {t.run_b}", "B/A"]
    rows = speed_rows(t)
    lines = [f"## {title(t)}", ""]
    if not t.steps:
        return lines + ["No training step is logged by both runs: nothing to compare.", ""]
    lines += [
        f"Median per step over the {len(t.steps)} step(s) both runs logged "
        f"({t.steps[0]}–{t.steps[-1]}){_cold(t)}; per node = step total_s / nodes that step trained on.",
        "",
    ]
    lines += ["| " + " | ".join(head) + " |", "|---|---:|---:|---:|"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    if line := cheaper_line(t):
        lines += ["", line]
    return [*lines, ""]


def _cold(t: SpeedTable) -> str:
    if not t.left_out:
        return ""
    which = ", ".join(str(s) for s in t.left_out)
    return f", step {which} left out as cold (engine start, first autotune; `--cold-steps 0` keeps it)"


def cheaper_line(t: SpeedTable) -> str:
    r = t.per_node.ratio
    if not r:
        return ""
    if r >= 1:
        return f"{t.run_a} is {r:.2f}× cheaper per node than {t.run_b}."
    return f"{t.run_b} is {1 / r:.2f}× cheaper per node than {t.run_a}."


def print_speed(t: SpeedTable, console) -> None:
    """The table in the terminal (rich), the same rows as report.md."""
    from rich.table import Table

    table = Table(title=title(t))
    for i, head in enumerate(["phase (median per step)", f"A: {t.run_a}", f"B: {t.run_b}", "B/A"]):
        table.add_column(head, justify="left" if i == 0 else "right")
    for row in speed_rows(t) if t.steps else []:
        table.add_row(*row)
    console.print(table)
    if t.left_out:
        console.print(_cold(t).removeprefix(", ").capitalize(), soft_wrap=True)
    console.print(cheaper_line(t) or "no training step logged by both runs", soft_wrap=True)
