"""`treegrpo run CONFIG` and `treegrpo demo`."""

from __future__ import annotations

import asyncio
import shlex
import signal
from collections.abc import Coroutine
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import typer
from rich.console import Console

from treegrpo.config import ConfigError
from treegrpo.runner._config import RunFile, load_run_file
from treegrpo.runner._examples import DEMO, example, resolve_run_file

console = Console(highlight=False)
T = TypeVar("T")


def resume_command(config: Path | None, overrides: list[str], attach: bool = False) -> str:
    """How to resume a run started this way: the same run file and settings (the [run] table
    comes from the log), with `{run_id}` to fill in."""
    argv = ["treegrpo", "run", *([str(config)] if config else []), "--resume", "{run_id}"]
    argv += ["--attach"] if attach else []
    for o in overrides:
        if not o.startswith("run."):
            argv += ["--set", o]
    return " ".join(shlex.quote(a) if a != "{run_id}" else a for a in argv)


async def _stoppable(work: Coroutine[Any, Any, T]) -> T:
    """SIGTERM (`kill`, a container stop, a CI's timeout) stops a run as a first Ctrl-C does:
    services drained, `run.ended stopped` recorded, resumable."""
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, asyncio.current_task().cancel)
    try:
        return await work
    finally:
        loop.remove_signal_handler(signal.SIGTERM)


@dataclass(frozen=True)
class Flags:
    """What `treegrpo run`'s own options set, applied to the typed run file after `--set`."""

    train: bool | None = None
    attach: bool = False
    retry_masked: bool = False
    max_staleness: int | None = None
    models: str = ""  # the demo's warm-started policy: the sampler's and the learner's model

    def apply(self, rf: RunFile) -> RunFile:
        run = {"train": self.train, "max_staleness": self.max_staleness}
        rf = rf.with_run(**{k: v for k, v in run.items() if v is not None})
        if self.attach:
            rf = rf.with_runner(attach=True)
        if self.retry_masked:
            rf = rf.with_runner(retry_masked=True)
        if self.models:
            rf = rf.with_service("sampler", model=self.models).with_service("learner", model=self.models)
        return rf


def _execute(
    config: Path | None, overrides: list[str], resume: str, flags: Flags, control: bool = False
) -> int:
    from treegrpo.bus import BusUnavailable, BusWriteError
    from treegrpo.embedded import EmbeddedNatsError
    from treegrpo.runner._control import execute_paired
    from treegrpo.runner._execute import execute

    how = resume_command(config, overrides, flags.attach)
    config = resolve_run_file(config)
    if control and resume:
        console.print("[red]--control starts a new pair of runs; it cannot --resume[/]")
        return 2
    if flags.retry_masked and not resume:
        console.print("[red]--retry-masked re-runs masked nodes of a run it resumes: it needs --resume[/]")
        return 2
    try:
        rf = flags.apply(load_run_file(config, overrides))
        rf.spec()  # the flags' [run] values checked too
    except ConfigError as exc:
        console.print(f"[red]config error:[/] {exc}")
        return 2
    try:
        if control:
            result = asyncio.run(_stoppable(execute_paired(rf, console, how)))
        else:
            result = asyncio.run(_stoppable(execute(rf, resume=resume, console=console, resume_cmd=how)))
    except (KeyboardInterrupt, asyncio.CancelledError):  # stopped before the run began
        return 130
    except ConfigError as exc:
        console.print(f"[red]{exc}[/]")
        return 2
    except (BusUnavailable, BusWriteError, EmbeddedNatsError) as exc:  # before the run could start
        console.print(f"[red]cannot start: {exc}[/]", soft_wrap=True)
        return 1
    return {"completed": 0, "stopped": 130}.get(result.outcome, 1)


def run(
    config: Path | None = typer.Argument(
        None,
        help="Run file (TOML: [run], [runner], [sampler], ...), or the "
        "name of an example shipped in treegrpo/examples (run-small)",
    ),
    resume: str = typer.Option("", "--resume", help="Resume this run id from the log"),
    retry_masked: bool = typer.Option(
        False,
        "--retry-masked",
        help="With --resume: run again the nodes infrastructure faults masked, in groups not yet scored",
    ),
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
    train = False if no_train else None
    flags = Flags(train=train, attach=attach, retry_masked=retry_masked, max_staleness=max_staleness)
    raise typer.Exit(_execute(config, list(set_), resume, flags, control))


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
    models = ""
    if not skip_sft:
        from treegrpo.config import treegrpo_home
        from treegrpo.plugins import NotInstalled, hook

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
        models = str(model_dir)
    raise typer.Exit(_execute(config or example(DEMO), list(set_), "", Flags(models=models), control))
