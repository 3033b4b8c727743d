"""Core commands: the embedded server, reading the log, running one service."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import time
from pathlib import Path

import typer
from google.protobuf.json_format import MessageToDict
from rich.console import Console

from treegrpo import events
from treegrpo.cli._describe import describe
from treegrpo.config import ConfigError, load, parse_overrides, treegrpo_home
from treegrpo.events import Kind
from treegrpo.nats_url import nats_for, resolve_nats_url

nats_app = typer.Typer(no_args_is_help=True)
console = Console(highlight=False)


@nats_app.command("up")
def nats_up(
    port: int = typer.Option(4222, help="Port on 127.0.0.1 (0 = any free port), if it is not running yet"),
    data: Path | None = typer.Option(None, help="Store dir (default $TREEGRPO_HOME/nats/data)"),
) -> None:
    """Keep the home's embedded nats-server up in the foreground; other commands find it through
    $TREEGRPO_HOME and share it. Ctrl-C lets go of it: it stops once no run uses it either."""
    from treegrpo.embedded import SharedNats

    shared = SharedNats(what="treegrpo nats up")
    url = shared.acquire(port=port, store=data)
    state = shared.state()
    store = state.store if state else data
    if state is not None and port and state.port != port:
        console.print(
            f"[yellow]the home's nats-server was already running at {url}; --port {port} ignored[/]"
        )
    console.print(
        f"[green]nats-server[/] listening on [bold]{url}[/] (JetStream store {store}); Ctrl-C stops"
    )
    stop = {"now": False}
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.update(now=True))
    try:
        while not stop["now"]:
            for note in shared.check():
                console.print(f"[yellow]{note}[/]")
            time.sleep(0.2)
    finally:
        shared.release()


async def _connect(url: str, who: str, timeout: float = 10.0):
    from treegrpo.bus import Bus

    return await Bus.connect(resolve_nats_url(url), who, timeout)


def tail_cmd(
    run_id: str = typer.Argument(..., help="Run id"),
    url: str = typer.Option("", help="NATS URL (default: $TREEGRPO_NATS_URL or the embedded server)"),
    until_complete: bool = typer.Option(False, help="Exit after run.completed"),
) -> None:
    """Follow a run live from its first event; Ctrl-C stops."""
    asyncio.run(_tail(run_id, url, until_complete))


async def _tail(run_id: str, url: str, until_complete: bool) -> None:
    with nats_for(url, "treegrpo tail") as resolved:
        await _tail_from(await _connect(resolved, "cli/tail"), run_id, until_complete)


async def _tail_from(bus, run_id: str, until_complete: bool) -> None:
    def undecodable(subject: str, exc: Exception) -> None:
        console.print(f"[red]undecodable message on {subject}: {exc}[/]")

    try:
        async with contextlib.aclosing(bus.follow(run_id, on_undecodable=undecodable)) as stream:
            async for event in stream:
                style, text = describe(event)
                stamp = time.strftime("%H:%M:%S", time.localtime(event.envelope.time))
                console.print(f"[dim]{stamp}[/] [{style}]{events.kind_of(event):<16}[/] {text}")
                if until_complete and events.kind_of(event) == Kind.RUN_COMPLETED:
                    break
    except asyncio.CancelledError:
        pass
    finally:
        await bus.close(2)


def events_cmd(
    run_id: str = typer.Argument(..., help="Run id"),
    json_out: bool = typer.Option(False, "--json", help="JSON lines, one event each"),
    kind: list[str] = typer.Option([], help="Only these kinds, e.g. node.graded"),
    url: str = typer.Option("", help="NATS URL"),
) -> None:
    """Dump a run's events in stream order."""
    asyncio.run(_events(run_id, json_out, kind, url))


async def _events(run_id: str, json_out: bool, kinds: list[str], url: str) -> None:
    with nats_for(url, "treegrpo events") as resolved:
        await _events_from(await _connect(resolved, "cli/events"), run_id, json_out, kinds)


async def _events_from(bus, run_id: str, json_out: bool, kinds: list[str]) -> None:
    try:
        async for seq, event in bus.replay(run_id, kinds or None):
            if json_out:
                record = MessageToDict(event, preserving_proto_field_name=True)
                record["seq"] = seq
                print(json.dumps(record, sort_keys=True))
            else:
                style, text = describe(event)
                console.print(f"[dim]{seq:>7}[/] [{style}]{events.kind_of(event):<16}[/] {text}")
    finally:
        await bus.close(2)


def serve_cmd(
    service: str = typer.Argument(..., help="sampler | executor | grader | learner"),
    config: Path | None = typer.Option(None, "--config", "-c", help="TOML config file"),
    set_: list[str] = typer.Option([], "--set", help="Override, e.g. --set max_concurrency=4"),
) -> None:
    """Run one service against NATS until SIGTERM (then drain within nats.drain_timeout_s)."""
    from treegrpo.plugins import NotInstalled, service_class
    from treegrpo.service import serve

    try:
        cls = service_class(service)
    except NotInstalled as exc:
        console.print(f"[red]{exc}[/]")
        raise typer.Exit(2) from exc
    try:
        cfg = load(cls.config_cls, config, parse_overrides(set_))
    except ConfigError as exc:
        console.print(f"[red]config error:[/] {exc}")
        raise typer.Exit(2) from exc
    import uvloop  # the consumer loop is event-loop bound: uvloop is ~1.5x faster than asyncio's

    code = uvloop.run(serve(cls(cfg)))
    if code:
        raise typer.Exit(code)


def health_cmd(
    url: str = typer.Option("", help="NATS URL"),
    timeout: float = typer.Option(3.0, help="Seconds to reach NATS"),
    heartbeat: bool = typer.Option(
        False,
        "--heartbeat",
        help="Check the service's own heartbeat: fresh, its consumer loop turning, its process alive",
    ),
    service: str = typer.Option(
        "", help="Whose heartbeat ($TREEGRPO_HOME/health/NAME.json); empty = every file there"
    ),
    file: Path | None = typer.Option(
        None, help="A heartbeat file configured elsewhere (the service's health.file)"
    ),
    max_age: float = typer.Option(
        60.0, help="Seconds after which a heartbeat or a consumer loop counts as stuck"
    ),
    ready: bool = typer.Option(
        False, "--ready", help="Readiness: with --heartbeat, also NATS reachable and the service connected"
    ),
) -> None:
    """Probe. Without --heartbeat: NATS reachable and the event stream present. With --heartbeat
    (liveness): the service's own event and consumer loops are turning; --ready adds the NATS checks."""
    from treegrpo.findings import heartbeat_findings, home_findings
    from treegrpo.health import check_files, health_dir, heartbeat_path, read_heartbeats

    problems = []
    if heartbeat:
        paths = (
            [file] if file else [heartbeat_path(service)] if service else sorted(health_dir().glob("*.json"))
        )
        problems += check_files(paths, max_age, ready)
        if ready:  # a bus that takes no writes: not ready; alive all the same (a restart cannot help)
            problems += [f.line() for f in heartbeat_findings(read_heartbeats(paths))]
    if not heartbeat or ready:
        problems += _nats_problems(url, timeout)
    embedded = not (url or os.environ.get("TREEGRPO_NATS_URL"))
    if embedded and (not heartbeat or ready):  # liveness looks at the service's own loops alone
        # the home's embedded server: who uses it, and what its keeper and the runs' services say
        notes, found = home_findings(treegrpo_home())
        for note in notes:
            console.print(note, soft_wrap=True)
        problems += [f.line() for f in found]
    for p in problems:
        console.print(f"[red]unhealthy:[/] {p}", soft_wrap=True)
    if problems:
        raise typer.Exit(1)
    console.print("[green]healthy[/]")


def _nats_problems(url: str, timeout: float) -> list[str]:
    async def check() -> None:
        bus = await _connect(url, "cli/health", timeout)
        try:
            await bus.check_stream()
        finally:
            await bus.close(1)

    try:
        asyncio.run(check())
    except Exception as exc:  # any failure is "unhealthy", with the reason
        return [f"NATS: {type(exc).__name__}: {exc}"]
    return []
