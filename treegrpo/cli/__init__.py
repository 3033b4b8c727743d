"""`treegrpo`: the command line. Core commands live here and in `_commands.py`; services add theirs by
entry points (`treegrpo.commands`, `treegrpo/plugins.py`)."""

from __future__ import annotations

import importlib
import logging
import os
import sys

import typer

from treegrpo.cli._commands import COMMANDS
from treegrpo.cli._core import events_cmd, health_cmd, nats_app, serve_cmd, tail_cmd
from treegrpo.plugins import commands as service_commands

app = typer.Typer(
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_show_locals=False,
    help="Tree search + GRPO for ML-engineering agents, on NATS JetStream.",
)
app.add_typer(nats_app, name="nats", help="The embedded nats-server")
app.command("tail", help="Follow a run's events, human-readable")(tail_cmd)
app.command("events", help="Dump a run's events (--json for JSON lines)")(events_cmd)
app.command("serve", help="Run one service: sampler | executor | grader | learner")(serve_cmd)
app.command(
    "health", help="Probe for k8s/compose: NATS and the stream; --heartbeat: the service's own loops"
)(health_cmd)


def _register(name: str, load, help_text: str) -> None:
    try:
        obj = load()
    except ModuleNotFoundError as exc:
        # only hide a missing optional module of ours or an extra's dependency; real bugs surface
        missing = exc.name or ""

        def unavailable() -> None:
            typer.secho(
                f"`treegrpo {name}` is unavailable: {missing} is not installed (make setup installs all)",
                fg="red",
                err=True,
            )
            raise typer.Exit(2)

        app.command(name, help=f"{help_text} (unavailable: {missing})")(unavailable)
        return
    if isinstance(obj, typer.Typer):
        app.add_typer(obj, name=name, help=help_text or None)
    else:
        app.command(name, help=help_text or None)(obj)  # None: the function's docstring


def _core_target(target: str):
    module_name, attr = target.split(":")
    return lambda: getattr(importlib.import_module(module_name), attr)


def main() -> None:
    # libgomp's default spin-waiting makes torch 10-40x slower whenever other processes share the
    # cores (our services, the scripts they run): measured 13.6 s vs 0.36 s for the same generate.
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s", stream=sys.stderr
    )
    wanted = sys.argv[1] if len(sys.argv) > 1 else ""
    # import only the command being run (keeps `treegrpo tail` free of torch); all for --help
    everything = wanted in ("", "--help", "-h")
    for name, (target, help_text) in COMMANDS.items():
        if everything or wanted == name:
            _register(name, _core_target(target), help_text)
    for name, ep in service_commands().items():
        if everything or wanted == name:
            _register(name, ep.load, "")
    app()
