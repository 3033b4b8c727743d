"""`treegrpo report RUN... [--out DIR] [--json] [--estimator E] [--control CONTROL_RUN]
[--against RUN_B] [--open]`."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Annotated

import orjson
import typer
from rich.console import Console

from treegrpo.advantages import ESTIMATORS
from treegrpo.bus import ReplayIncomplete
from treegrpo.report._build import build_report
from treegrpo.report._output import print_rich


def _from_dirs(paths: list[str]):
    from treegrpo.report._data import load_from_root

    data = [d for p in paths for d in load_from_root(p)]
    if not data:
        raise LookupError(f"no run directories (round_N/ or timing.jsonl) under {', '.join(paths)}")
    return data


async def _build(
    runs: list[str],
    out: Path,
    estimator: str,
    gpus: int,
    tree_round: int | None,
    nats: str,
    control: str,
    late_from: int | None,
    min_difference: float,
    against: str = "",
    cold_steps: int = 1,
):
    if control and len(runs) != 1:
        raise typer.BadParameter("--control pairs with exactly one train run")
    if against and len(runs) != 1:
        raise typer.BadParameter("--against compares exactly one run (A) with RUN_B")
    given = runs + ([control] if control else []) + ([against] if against else [])
    paths = [r for r in given if Path(r).is_dir()]
    if paths:  # seed-format roots or run directories on disk
        if len(paths) != len(given):
            raise typer.BadParameter("give either run ids on the bus or directories, not both")
        from treegrpo.report._build import write_report

        ctl = _from_dirs([control])[0] if control else None
        vs = _from_dirs([against])[0] if against else None
        return write_report(
            _from_dirs(runs), out, estimator, gpus, tree_round, ctl, late_from, min_difference, vs, cold_steps
        )
    from treegrpo.bus import Bus
    from treegrpo.nats_url import nats_for

    with nats_for(nats, "treegrpo report") as url:  # the embedded server, up for as long as we read
        bus = await Bus.connect(url, "report/cli")
        try:
            return await build_report(
                bus,
                runs,
                out,
                estimator,
                gpus,
                tree_round,
                control or None,
                late_from,
                min_difference,
                against or None,
                cold_steps,
            )
        finally:
            await bus.close()


def _open(path: Path) -> None:
    """Hand the page to the desktop's browser (webbrowser: $BROWSER, xdg-open, ...); say so if none."""
    import webbrowser

    if not webbrowser.open(path.resolve().as_uri()):
        Console(stderr=True).print(f"no web browser found; open {path.resolve().as_uri()}")


def report(
    runs: Annotated[
        list[str],
        typer.Argument(
            help="Run ids on the bus, or seed-format roots / run dirs; none = every run on the bus"
        ),
    ] = None,
    out: Annotated[
        Path, typer.Option("--out", "-o", help="Where report.md, report.json and the PNGs go")
    ] = Path("report"),
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the numbers as JSON instead of tables")
    ] = False,
    estimator: Annotated[
        str, typer.Option(help=f"Advantage estimator: {', '.join(ESTIMATORS)}")
    ] = "grpo_valid_only",
    gpus: Annotated[
        int, typer.Option(min=1, help="GPUs per training step, for GPU-hours = Σ total_s × GPUs")
    ] = 1,
    tree_round: Annotated[
        int, typer.Option(help="Round of the first run to draw as a tree (default: its last complete one)")
    ] = None,
    control: Annotated[
        str,
        typer.Option(
            "--control",
            help="The paired no-train run (`treegrpo run --control`): adds train − control and the verdict",
        ),
    ] = "",
    late_from: Annotated[
        int,
        typer.Option(
            "--late-from",
            min=2,
            help="First round compared with the control (default: the later half of the rounds)",
        ),
    ] = None,
    min_difference: Annotated[
        float,
        typer.Option(
            "--min-difference",
            min=0.0,
            help="`learned` also needs train − control ≥ this (sample score units); 0 = the interval alone",
        ),
    ] = 0.0,
    against: Annotated[
        str,
        typer.Option(
            "--against",
            help="A second run B: adds the seed's speed table (per-step phases, per-node cost, B/A)",
        ),
    ] = "",
    cold_steps: Annotated[
        int,
        typer.Option(
            "--cold-steps",
            min=0,
            help="Speed table: leave out the first N common steps (engine start, first autotune)",
        ),
    ] = 1,
    nats: Annotated[
        str, typer.Option("--nats", help="NATS URL (default: $TREEGRPO_NATS_URL, then the embedded server)")
    ] = "",
    open_page: Annotated[
        bool, typer.Option("--open", help="Open report.html, the run explorer, in the desktop's web browser")
    ] = False,
) -> None:
    """The capability report of one or more runs: printed, and written as Markdown + PNG plots and
    report.html, an offline run explorer (the search trees, each node's code and diff, the curves)."""
    if estimator not in ESTIMATORS:
        raise typer.BadParameter(f"--estimator must be one of {', '.join(ESTIMATORS)}")
    try:
        rep = asyncio.run(
            _build(
                runs or [],
                out,
                estimator,
                gpus,
                tree_round,
                nats,
                control,
                late_from,
                min_difference,
                against,
                cold_steps,
            )
        )
    except LookupError as exc:
        Console(stderr=True).print(f"[red]{exc}[/red]")
        raise typer.Exit(2) from exc
    except ReplayIncomplete as exc:  # never a report of a shortened run
        Console(stderr=True).print(f"[red]{exc}[/red]")
        raise typer.Exit(3) from exc
    if open_page:
        _open(rep.html_path)
    if as_json:
        sys.stdout.write(orjson.dumps(rep.data, option=orjson.OPT_INDENT_2).decode() + "\n")
        return
    console = Console()
    print_rich(rep.runs, console)
    console.print(f"report: {rep.markdown_path} (+ {len(rep.plots)} plots, {rep.json_path.name})")
    console.print(f"explorer: {rep.html_path.resolve().as_uri()}", soft_wrap=True)
    if rep.speed is not None:
        from treegrpo.report._speed import print_speed

        print_speed(rep.speed, console)
    if rep.learning_note:
        console.print(f"[bold]{rep.learning_note}[/]", soft_wrap=True)
    if rep.comparison is not None:
        from treegrpo.report._learning_output import verdict_line

        console.print(
            f"[bold]{verdict_line(rep.comparison)}[/]  curves: {rep.out_dir / 'learning_vs_control.png'}",
            soft_wrap=True,
        )
