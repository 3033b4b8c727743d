"""One run end to end: NATS, the four services as processes, run.started, progress, export, report."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from dataclasses import dataclass
from pathlib import Path

from opentelemetry import trace
from rich.console import Console

from treegrpo.bus import Bus
from treegrpo.config import ConfigError, RunSpec, treegrpo_home
from treegrpo.embedded import free_port
from treegrpo.health import heartbeat_path
from treegrpo.runner._config import RunFile
from treegrpo.runner._faults import FaultWatch
from treegrpo.runner._lifecycle import claim_run, new_run_id, record_end, reopen_run, uninterrupted
from treegrpo.runner._loop import BUS_DOWN, Loop, watch_forever
from treegrpo.runner._nats import NatsHandle, open_nats
from treegrpo.runner._progress import Progress
from treegrpo.runner._retry import retry_masked
from treegrpo.runner._supervisor import Supervisor
from treegrpo.runner._wiring import wire, write_configs
from treegrpo.telemetry import file_tracer

log = logging.getLogger(__name__)


@dataclass
class RunResult:
    run_id: str
    outcome: str
    progress: Progress
    out_dir: Path
    run_dir: Path


async def existing_spec(bus: Bus, run_id: str) -> RunSpec:
    found = await bus.run_start(run_id)
    if found is None:
        raise ConfigError(f"no run {run_id!r} in the log to resume")
    return found.spec


async def execute(
    rf: RunFile, resume: str = "", console: Console | None = None, resume_cmd: str = ""
) -> RunResult:
    """Run (or resume) one run to completion; Ctrl-C stops it cleanly, resumable. Every attempt
    ends with `run.ended` on the log (completed / stopped / failed and why). `resume_cmd` is how
    the user resumes it (`{run_id}` filled in), printed when the run stops resumable."""
    console = console or Console()
    home = treegrpo_home()
    nats = open_nats(rf.runner.nats_url, what="treegrpo run")
    try:
        bus = await Bus.connect(nats.url, "runner", 15, replicas=rf.runner.stream_replicas)
        try:
            await bus.ensure()
            return await _execute(rf, resume, console, home, nats, bus, resume_cmd)
        finally:
            await bus.close(5)
    finally:
        nats.close()


def _runner_span(tracer: trace.Tracer, what: str, run_id: str, **attrs: str):
    return tracer.start_as_current_span(
        f"runner {what}",
        kind=trace.SpanKind.PRODUCER,
        attributes={"treegrpo.run_id": run_id, **{f"treegrpo.{k}": v for k, v in attrs.items()}},
    )


async def _execute(
    rf: RunFile, resume: str, console: Console, home: Path, nats: NatsHandle, bus: Bus, resume_cmd: str
) -> RunResult:
    spec = await existing_spec(bus, resume) if resume else rf.spec()
    if not resume:
        spec = spec.model_copy(update={"run_id": spec.run_id or new_run_id()})
    run_dir = home / "runs" / spec.run_id
    nats.label(f"treegrpo run {spec.run_id}", spec.run_id)
    prepare_tasks(spec)
    configs = wire(rf, spec, nats.url, free_port(), run_dir)
    if not spec.train:
        configs.pop("learner")
    # the runner's own facts (run.started / resumed / ended / completed) are published inside spans
    # of its own trace file (its folder made by wire), so the traceparent they carry
    # names a span a trace viewer can show
    tracer = file_tracer("runner", run_dir / "traces" / "runner.jsonl")
    out_dir = Path(rf.runner.out_dir) if rf.runner.out_dir else run_dir
    # the log decides who owns a run id: claim it (or reopen it) before anything else is written
    with _runner_span(tracer, "reopen run" if resume else "claim run", spec.run_id):
        if resume:
            attempt = await reopen_run(bus, spec.run_id)
            if rf.runner.retry_masked:  # before the services start: the executor finds them queued
                retried = await retry_masked(bus, spec.run_id, attempt)
                console.print(f"[bold]run {spec.run_id}[/]: {retried.line()}")
        else:
            await claim_run(bus, spec)
            attempt = 1
    run_dir.mkdir(parents=True, exist_ok=True)
    paths = write_configs(configs, run_dir)
    sup = Supervisor(run_dir, rf.runner.max_restarts, rf.runner.restart_services, rf.runner.stuck_after_s)
    env = {
        "TREEGRPO_HOME": str(home),
        "TREEGRPO_NATS_URL": nats.url,
        "OMP_WAIT_POLICY": os.environ.get("OMP_WAIT_POLICY", "PASSIVE"),
    }
    for name in paths:
        if not rf.runner.attach:
            sup.add_service(name, paths[name], env, heartbeat_path(name, root=run_dir))
    progress = Progress(spec.tasks, spec.rounds, spec.train)
    faults = FaultWatch(
        bus, nats, _watched_folders(home, nats), rf.runner.min_free_mb, rf.runner.bus_wait_s, sup.beats
    )
    stop = asyncio.Event()
    outcome, reason = "failed", "the runner stopped unexpectedly"
    resume_line = (resume_cmd or "treegrpo run --resume {run_id}").format(run_id=spec.run_id)
    watcher = asyncio.create_task(watch_forever(bus, spec.run_id, progress, stop))
    try:
        sup.start_all()
        console.print(
            f"[bold]run {spec.run_id}[/]{f' (attempt {attempt})' if attempt > 1 else ''} — "
            f"{len(spec.tasks)} task(s) × {spec.rounds} round(s), "
            f"E={spec.tree.expansions} G={spec.tree.group_size}, train={spec.train}, "
            f"max_staleness={spec.max_staleness}; logs in {run_dir / 'logs'}"
        )
        outcome, reason = await Loop(rf, sup, nats, faults, progress, console).run()
    except (KeyboardInterrupt, asyncio.CancelledError):
        outcome, reason = "stopped", "interrupted (Ctrl-C or SIGTERM); resumable"
    finally:
        stop.set()
        # a first Ctrl-C while the run closes (say, just after it completed) must not lose its end
        closing = _close(
            sup, watcher, rf.runner.stop_grace_s, tracer, bus, spec.run_id, attempt, outcome, reason
        )
        recorded, interrupted = await uninterrupted(closing)
        if interrupted:
            console.print("[yellow]interrupted while the run closed: closed it first[/]")
        if not recorded:
            console.print(
                f"[yellow]run {spec.run_id}: its end ({_logged(outcome)}) could not be recorded on the "
                "log; the run stays open (resumable)[/]",
                soft_wrap=True,
            )
    if outcome == "completed":
        if not await _export_and_report(rf, bus, spec.run_id, out_dir, console):
            outcome = "export_failed"
    elif outcome == "stopped":
        console.print(f"[yellow]stopped.[/] resume with: [bold]{resume_line}[/]", soft_wrap=True)
    elif outcome == BUS_DOWN:  # one line: the cause, its fix, and how to go on
        console.print(
            f"[red]run {spec.run_id} stopped:[/] {reason}, then resume with: {resume_line}", soft_wrap=True
        )
    else:
        console.print(f"[red]run {spec.run_id} failed:[/] {reason}")
    return RunResult(spec.run_id, outcome, progress, out_dir, run_dir)


async def _close(
    sup: Supervisor,
    watcher: asyncio.Task,
    grace_s: float,
    tracer: trace.Tracer,
    bus: Bus,
    run_id: str,
    attempt: int,
    outcome: str,
    reason: str,
) -> bool:
    """Stop the services (in a thread, so this loop keeps answering the server while they drain),
    then the watcher, then record the attempt's end. False if the end could not be recorded.
    On BUS_DOWN the bus took nothing for minutes: the services cannot drain into it and the end is
    tried briefly."""
    down = outcome == BUS_DOWN
    await asyncio.to_thread(sup.stop_all, min(grace_s, 5.0) if down else grace_s)
    with contextlib.suppress(Exception, asyncio.CancelledError):
        await watcher
    with _runner_span(tracer, "end run", run_id, outcome=outcome):
        return await record_end(bus, run_id, attempt, _logged(outcome), reason, 3.0 if down else 30.0)


def _logged(outcome: str) -> str:
    """The outcome as `run.ended` records it (completed / stopped / failed)."""
    return "failed" if outcome == BUS_DOWN else outcome


def _watched_folders(home: Path, nats: NatsHandle) -> dict[str, Path]:
    folders = {"$TREEGRPO_HOME": home}
    if nats.embedded:  # a server elsewhere keeps its store on a disk we cannot see
        folders["the NATS store"] = nats.store
    return folders


def prepare_tasks(spec: RunSpec) -> None:
    """Generate the built-in tasks the run names once (a cache), before the services that read them
    start; MLE-bench tasks come from their data roots."""
    from treegrpo.tasks import BUILTINS, ensure_builtin_tasks

    builtin = [t for t in spec.tasks if t in BUILTINS]
    if builtin:  # ensure_builtin_tasks(tasks=[]) would mean every built-in
        ensure_builtin_tasks(tasks=builtin)


async def _export_and_report(rf: RunFile, bus: Bus, run_id: str, out_dir: Path, console: Console) -> bool:
    """False when the export breaks one of the seed's invariants (the files stay for inspection).
    With both, the report reads the run in the export's passes (two replays, not four)."""
    from treegrpo.archive import ArchiveInvariantError, collect_facts, export_runs
    from treegrpo.report import BusReading, build_report, write_report

    reading = None
    if rf.runner.export:
        facts = await collect_facts(bus, run_id)
        reading = BusReading(facts) if rf.runner.report else None
        also = None if reading is None else (lambda _run, body: reading.accept(body))
        try:
            export_runs_result = await export_runs(
                bus, [run_id], out_dir / "export", facts={run_id: facts}, on_sampled=also
            )
        except ArchiveInvariantError as exc:
            console.print(f"[red]export broke the seed's invariants:[/] {exc}")
            return False
        r = export_runs_result[0]
        console.print(
            f"[green]exported[/] {r.nodes} nodes in {r.rounds} task-rounds ({r.bytes / 1e6:.1f} MB) "
            f"as the seed's data root: {r.path}"
        )
    if rf.runner.report:
        if reading is not None:
            rep = write_report([reading.finish()], out_dir / "report")
        else:
            rep = await build_report(bus, [run_id], out_dir / "report")
        console.print(
            f"[green]report[/]: {rep.markdown_path}; explorer: {rep.html_path.resolve().as_uri()}",
            soft_wrap=True,
        )
    return True
