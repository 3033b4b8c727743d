"""`treegrpo run CONFIG` and `treegrpo demo`."""

from __future__ import annotations

import asyncio
from pathlib import Path

import typer
from rich.console import Console

from treegrpo.config import ConfigError
from treegrpo.runner._config import load_run_file
from treegrpo.runner._examples import DEMO, example, resolve_run_file

console = Console(highlight=False)


def _execute(config: Path | None, overrides: list[str], resume: str, control: bool = False) -> int:
    from treegrpo.runner._control import execute_paired
    from treegrpo.runner._execute import execute

    config = resolve_run_file(config)
    if control and resume:
        console.print("[red]--control starts a new pair of runs; it cannot --resume[/]")
        return 2
    try:
        rf = load_run_file(config, overrides)
    except ConfigError as exc:
        console.print(f"[red]config error:[/] {exc}")
        return 2
    try:
        if control:
            result = asyncio.run(execute_paired(config, overrides, console))
        else:
            result = asyncio.run(execute(rf, resume=resume, console=console))
    except KeyboardInterrupt:
        return 130
    except ConfigError as exc:
        console.print(f"[red]{exc}[/]")
        return 2
    return {"completed": 0, "stopped": 130}.get(result.outcome, 1)


def run(
    config: Path | None = typer.Argument(
        None,
        help="Run file (TOML: [run], [runner], [sampler], ...), or the "
        "name of an example shipped in treegrpo/examples (run-small)",
    ),
    resume: str = typer.Option("", "--resume", help="Resume this run id from the log"),
    no_train: bool = typer.Option(False, "--no-train", help="Search only: a capability probe, no learner"),
    attach: bool = typer.Option(
        False,
        "--attach",
        help="Services already run elsewhere (compose, k8s): publish run.started, follow, export, report",
    ),
    max_staleness: int | None = typer.Option(
        None, "--max-staleness", help="0 = sync (the seed); k = async up to k versions"
    ),
    control: bool = typer.Option(
        False,
        "--control",
        help=(
            "Then run a paired no-train control (same seed, tasks, prompts, tree; "
            "run id <id>-control) and report train − control with a verdict"
        ),
    ),
    set_: list[str] = typer.Option(
        [], "--set", help="Override, e.g. --set run.rounds=3 --set sampler.sampling.temperature=0.8"
    ),
) -> None:
    """Start NATS and the four services, run every round, then export and report."""
    overrides = list(set_)
    if no_train:
        overrides.append("run.train=false")
    if attach:
        overrides.append("runner.attach=true")
    if max_staleness is not None:
        overrides.append(f"run.max_staleness={max_staleness}")
    raise typer.Exit(_execute(config, overrides, resume, control))


def demo(
    skip_sft: bool = typer.Option(False, help="Use the model as it is (no SFT warm start)"),
    sft_seconds: float = typer.Option(
        0.0,
        help="Cap the SFT warm start's wall time (its learning rate then decays over the cap); "
        "0 = the recipe's fixed step count (~3.5 min on 2 CPU cores). Cached per setting",
    ),
    control: bool = typer.Option(
        True,
        "--control/--no-control",
        help="Run the paired no-train control after the train arm and print the verdict",
    ),
    config: Path | None = typer.Option(
        None,
        "--config",
        show_default="the shipped demo",
        help="Another run file with the demo policy: a path or a shipped "
        "example's name, e.g. learning-gpu (treegrpo/examples/)",
    ),
    set_: list[str] = typer.Option([], "--set", help="Override a demo setting"),
) -> None:
    """The embedded default: small local model, SFT warm start on the seed corpus, tree-GRPO rounds,
    then the same rounds without training, and the verdict: did training (not search) help?"""
    overrides = list(set_)
    if not skip_sft:
        from treegrpo.config import treegrpo_home
        from treegrpo.registry import NotInstalled, hook

        try:
            prepare_demo_policy = hook("demo_policy", provider="learner")
        except NotInstalled as exc:
            console.print(f"[red]{exc}[/]")
            raise typer.Exit(2) from exc

        console.print(
            f"[bold]demo policy[/]: small local model + SFT on the seed corpus "
            f"({f'{sft_seconds:.0f} s cap' if sft_seconds else 'fixed recipe'}; cached)"
        )
        budget = {"max_seconds": sft_seconds} if sft_seconds else {}
        model_dir = prepare_demo_policy(treegrpo_home() / "demo", overrides=budget)
        overrides += [f'sampler.model="{model_dir}"', f'learner.model="{model_dir}"']
    raise typer.Exit(_execute(config or example(DEMO), overrides, "", control))
