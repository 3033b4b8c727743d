"""`treegrpo sft`: fine-tune the policy on the seed corpus and/or the best nodes of past runs."""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

console = Console()


def sft(
    corpus: Annotated[
        bool, typer.Option("--corpus", help="Pairs from the seed corpus (draft / improve / debug)")
    ] = False,
    from_archive: Annotated[
        list[str] | None,
        typer.Option("--from-archive", help="Run id whose event log supplies pairs (repeatable)"),
    ] = None,
    model: Annotated[str, typer.Option(help="Base model folder; default $TREEGRPO_HOME/models/small")] = "",
    out: Annotated[str, typer.Option("--out", help="Output folder; default $TREEGRPO_HOME/models/sft")] = "",
    config: Annotated[Path | None, typer.Option("--config", help="TOML file with SftConfig fields")] = None,
    set_: Annotated[
        list[str] | None,
        typer.Option("--set", help="Override a field, e.g. --set lr=1e-3 --set archive.select=top-k"),
    ] = None,
    select: Annotated[str, typer.Option(help="Archive selection: best-per-group | top-k")] = "",
    top_k: Annotated[int, typer.Option(help="k of top-k (per run and task)")] = 0,
    dry_run: Annotated[bool, typer.Option(help="Build and count the pairs, train nothing")] = False,
) -> None:
    """Supervised fine-tuning on prompt -> completion pairs (loss on completion tokens only)."""
    from treegrpo.config import load, parse_overrides
    from treegrpo_learner.sft._run import build_pairs, resolve_paths
    from treegrpo_learner.sft._train import train_sft
    from treegrpo_learner.sft.config import SftConfig

    overrides = parse_overrides(set_ or [])
    for key, value in (("model", model), ("out_dir", out)):
        if value:
            overrides[key] = value
    archive = overrides.setdefault("archive", {})
    if from_archive:
        archive["runs"] = list(from_archive)
    if select:
        archive["select"] = select
    if top_k:
        archive["top_k"] = top_k
    cfg = load(SftConfig, config, overrides)
    if not corpus and not cfg.archive.runs:
        raise typer.BadParameter("give --corpus and/or --from-archive RUN")
    pairs = asyncio.run(build_pairs(cfg, use_corpus=corpus, console=console))
    _summary(pairs)
    if dry_run:
        return
    model_dir, out_dir = resolve_paths(cfg)
    result = train_sft(cfg, pairs, model_dir, out_dir)
    console.print(
        f"[green]wrote[/] {result.out_dir}: {result.steps} steps in {result.seconds:.0f}s, "
        f"loss {result.first_loss:.3f} -> {result.final_loss:.3f}, "
        f"{result.dropped_too_long} pairs over max_seq_tokens dropped; loss curve {out_dir / 'loss.png'}"
    )
    console.print_json(
        json.dumps(
            {
                "out_dir": str(result.out_dir),
                "steps": result.steps,
                "seconds": round(result.seconds, 1),
                "final_loss": round(result.final_loss, 4),
            }
        )
    )


def _summary(pairs) -> None:
    table = Table(title=f"{len(pairs)} training pairs")
    for col in ("task", "mode", "source", "pairs"):
        table.add_column(col)
    counts = Counter((p.task, p.mode, p.source.split(":")[0]) for p in pairs)
    for (task, mode, source), n in sorted(counts.items()):
        table.add_row(task, mode, source, str(n))
    console.print(table)
