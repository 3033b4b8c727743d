"""`treegrpo archive export RUN... --out DIR` and `treegrpo archive import DIR`."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TransferSpeedColumn

from treegrpo.archive._export import ArchiveInvariantError, export_runs
from treegrpo.archive._import import import_root
from treegrpo.archive._read import find_runs
from treegrpo.bus import ReplayIncomplete

app = typer.Typer(
    help="Export runs as the seed's data root, or import a seed-format root into the log.",
    no_args_is_help=True,
)
console = Console(stderr=True)

NatsOpt = Annotated[
    str, typer.Option("--nats", help="NATS URL (default: $TREEGRPO_NATS_URL, then the embedded server)")
]


@contextlib.asynccontextmanager
async def _bus(url: str, what: str):
    """A connected bus, on a lease of the home's embedded server when no URL is given."""
    from treegrpo.bus import Bus
    from treegrpo.nats_url import nats_for

    with nats_for(url, what) as resolved:
        bus = await Bus.connect(resolved, "archive/cli")
        try:
            await bus.ensure()
            yield bus
        finally:
            await bus.close()


@app.command("export")
def export_cmd(
    runs: Annotated[list[str], typer.Argument(help="Run ids; none means every run on the bus")] = None,
    out: Annotated[Path, typer.Option("--out", "-o", help="Data root to write <run_id>/ into")] = Path(
        "archive"
    ),
    strict: Annotated[bool, typer.Option(help="Fail when a seed invariant does not hold")] = True,
    nats: NatsOpt = "",
) -> None:
    """Write each run as <out>/<run_id>/round_N/ (node records, summary, tree, transcript) + timing.jsonl."""

    async def go():
        async with _bus(nats, "treegrpo archive export") as bus:
            ids = runs or await bus.run_ids()
            with Progress(
                TextColumn("export {task.description}"),
                TextColumn("{task.completed} nodes"),
                TimeElapsedColumn(),
                console=console,
            ) as bar:
                task = bar.add_task(", ".join(ids))
                return await export_runs(bus, ids, out, strict=strict, on_node=lambda _: bar.advance(task))

    try:
        results = asyncio.run(go())
    except ArchiveInvariantError as exc:
        console.print(f"[red]{exc}[/red]")
        raise typer.Exit(1) from exc
    except LookupError as exc:
        console.print(f"[red]{exc}[/red]")
        raise typer.Exit(2) from exc
    except ReplayIncomplete as exc:  # never a shorter export: say why and write nothing more
        console.print(f"[red]{exc}[/red]")
        raise typer.Exit(3) from exc
    for r in results:
        console.print(
            f"{r.run_id}: {r.rounds} rounds, {r.nodes} nodes, {r.bytes / 1e6:.1f} MB → {r.path}"
            + (f" ({r.ungraded_skipped} ungraded nodes left out)" if r.ungraded_skipped else "")
            + (
                f" ({r.infrastructure_skipped} nodes masked by infrastructure faults left out)"
                if r.infrastructure_skipped
                else ""
            )
            + (f" [yellow]{len(r.violations)} invariant warning(s)[/yellow]" if r.violations else "")
        )


@app.command("import")
def import_cmd(
    root: Annotated[Path, typer.Argument(help="A seed-format data root, or one run directory")],
    nats: NatsOpt = "",
) -> None:
    """Append a seed-format root to the log as events (idempotent: re-importing adds nothing)."""
    logging.getLogger("treegrpo.archive").setLevel(logging.ERROR)  # problems are printed below instead
    try:
        total = sum(f.stat().st_size for run in find_runs(root) for f in run.glob("round_*/*.jsonl"))
    except FileNotFoundError as exc:
        console.print(f"[red]{exc}[/red]")
        raise typer.Exit(2) from exc

    async def go():
        async with _bus(nats, "treegrpo archive import") as bus:
            with Progress(
                TextColumn("import"), BarColumn(), TransferSpeedColumn(), TimeElapsedColumn(), console=console
            ) as bar:
                task = bar.add_task("import", total=total)
                return await import_root(bus, root, on_bytes=lambda n: bar.advance(task, n))

    results = asyncio.run(go())
    bad = 0
    for r in results:
        for p in r.problems:
            console.print(f"[yellow]{p}[/yellow]")
        bad += len(r.problems)
        console.print(
            f"{r.run_id}: {r.nodes} nodes, {r.events} events published, {r.existing} already present"
        )
    if bad:
        console.print(f"[yellow]{bad} problem(s) reported above; those lines were skipped[/yellow]")
