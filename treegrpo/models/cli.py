"""`treegrpo model …`: build the small local model every offline run uses."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from treegrpo.config import treegrpo_home

model_app = typer.Typer(help="Build a small local model and tokenizer (no hub).", no_args_is_help=True)
console = Console()


@model_app.command("init")
def init(
    out_dir: Annotated[
        Path | None, typer.Argument(help="Folder to write; default $TREEGRPO_HOME/models/<size>")
    ] = None,
    size: str = typer.Option("small", help="tiny (tests) | small (embedded default, ~13M) | base (~30M)"),
    vocab_size: int = typer.Option(8192, help="BPE vocabulary size"),
    seed: int = typer.Option(0, help="Seed of the random weights"),
    tokenizer_split: str = typer.Option(
        "words",
        help="words: GPT-2 pre-split; lines: merges may cross spaces "
        "within a line (recurring lines become one token)",
    ),
    force: bool = typer.Option(False, help="Overwrite a folder that already holds a model"),
    shape: str = typer.Option(
        "",
        help="One of the seed's models as a random bf16 checkpoint of its real shape instead: "
        "qwen35-9b | qwen36-27b | qwen35-tiny (Qwen3_5ForConditionalGeneration, docs/VLLM.md)",
    ),
    device: str = typer.Option("cpu", help="Where --shape's weights are made (cuda: seconds, not minutes)"),
) -> None:
    """Write a Qwen3-architecture model with random weights and a locally trained tokenizer."""
    from treegrpo.models._builder import build_model
    from treegrpo.models._seed_shapes import build_seed_model

    out = out_dir or treegrpo_home() / "models" / (shape or size)
    if (out / "config.json").exists() and not force:
        console.print(f"[yellow]{out} already holds a model; --force to rebuild[/]")
        raise typer.Exit(0)
    started = time.perf_counter()
    with console.status(f"building the {shape or size} model …"):
        if shape:
            build_seed_model(out, shape, device=device, seed=seed)
        else:
            build_model(out, size=size, vocab_size=vocab_size, seed=seed, tokenizer_split=tokenizer_split)
    info = json.loads((out / "treegrpo_model.json").read_text())
    console.print(
        f"[green]wrote[/] {out}: {info['params'] / 1e6:.1f}M params, vocab {info['vocab_size']}, "
        f"{time.perf_counter() - started:.1f}s"
    )
