"""One run end to end: NATS, the four services as processes, run.started, progress, export, report."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
import tomllib
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from rich.console import Console
from rich.live import Live

from treegrpo import events as ev_mod
from treegrpo.bus import STREAM, Bus
from treegrpo.config import ConfigError, RunSpec, treegrpo_home
from treegrpo.embedded import free_port
from treegrpo.health import heartbeat_path
from treegrpo.runner._config import SERVICE_NAMES, RunFile, deep_merge
from treegrpo.runner._nats import NatsHandle, open_nats
from treegrpo.runner._progress import Progress
from treegrpo.runner._supervisor import Supervisor
from treegrpo.runner._toml import dump_toml
from treegrpo.v1 import events_pb2 as pb

log = logging.getLogger(__name__)


@dataclass
class RunResult:
    run_id: str
    outcome: str
    progress: Progress
    out_dir: Path
    run_dir: Path


def new_run_id() -> str:
    return datetime.now(UTC).strftime("%Y%m%d_%H%M%S")


async def existing_spec(bus: Bus, run_id: str) -> RunSpec:
    found = await bus.last_event(run_id, "run.started")
    if found is None:
        raise ConfigError(f"no run {run_id!r} in the log to resume")
    return RunSpec.model_validate_json(found.run_started.run_spec_json)


def service_sections(rf: RunFile, spec: RunSpec, url: str, grpc_port: int, run_dir: Path) -> dict[str, dict]:
    """Each service's config: the run file's section plus what the runner wires together."""
    home = treegrpo_home()
    model = rf.sampler.get("model") or spec.model or str(home / "models" / "small")
    common = {"nats": {"url": url}}
    wiring = {
        # the runner says run.completed once training caught up too, not when rollout ends
        "sampler": {"model": model, "grpc": {"port": grpc_port, "host": "127.0.0.1"}, "publish_run_completed": False},
        "executor": {},
        "grader": {},
        "learner": {"model": rf.learner.get("model") or model, "run_id": spec.run_id,
                    "sampler_endpoints": [f"127.0.0.1:{grpc_port}"]},
    }
    # one span file per service: several processes appending to one file could interleave lines;
    # heartbeats per run, so two runs on one home never read each other's
    traces = {n: {"telemetry": {"jsonl_path": str(run_dir / "traces" / f"{n}.jsonl")},
                  "health": {"file": str(heartbeat_path(n, root=run_dir))}} for n in SERVICE_NAMES}
    (run_dir / "traces").mkdir(parents=True, exist_ok=True)
    return {n: deep_merge(deep_merge(deep_merge(common, traces[n]), wiring[n]), rf.section(n)) for n in SERVICE_NAMES}


def validate_sections(sections: dict[str, dict]) -> None:
    """Fail before anything starts if a service section is wrong (names the field)."""
    from treegrpo.cli._core import service_class
    from treegrpo.config import load

    for name, data in sections.items():
        try:
            load(service_class(name).config_cls, None, data)
        except ConfigError as exc:
            raise ConfigError(f"[{name}] {exc}") from exc


def write_configs(sections: dict[str, dict], run_dir: Path) -> dict[str, Path]:
    paths = {}
    for name, data in sections.items():
        p = run_dir / "config" / f"{name}.toml"
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(dump_toml(data))
        tomllib.loads(p.read_text())  # what we wrote must read back
        paths[name] = p
    return paths


async def watch(bus: Bus, run_id: str, progress: Progress, stop: asyncio.Event) -> None:
    """Fold the run's events (from its first) into `progress` until `stop`."""
    sub = await bus.js.subscribe(f"{ev_mod.SUBJECT_ROOT}.{run_id}.>", stream=STREAM, ordered_consumer=True)
    try:
        while not stop.is_set():
            try:
                msg = await sub.next_msg(timeout=0.5)
            except TimeoutError:
                continue
            with contextlib.suppress(ev_mod.UndecodableEvent):
                progress.apply(ev_mod.decode(msg.data))
    finally:
        with contextlib.suppress(Exception):
            await sub.unsubscribe()


async def _publish_start(bus: Bus, spec: RunSpec) -> None:
    body = pb.RunStarted(run_spec_json=spec.model_dump_json(), tasks=spec.tasks, rounds=spec.rounds,
                         train=spec.train, max_staleness=spec.max_staleness, resource_gate=spec.resource_gate)
    await bus.publish(ev_mod.make_event(spec.run_id, "runner", body))


async def _finish_step(progress: Progress, rf: RunFile) -> bool:
    """True once rollout is complete and training caught up (or stopped coming)."""
    if not progress.rollout_done:
        return False
    if progress.training_done:
        return True
    quiet_since = max(progress.last_step_at, progress.started)
    return time.time() - quiet_since > rf.runner.learner_idle_s


async def execute(rf: RunFile, resume: str = "", console: Console | None = None) -> RunResult:
    """Run (or resume) one run to completion; Ctrl-C stops it cleanly, resumable."""
    console = console or Console()
    home = treegrpo_home()
    nats = open_nats(rf.runner.nats_url)
    bus = await Bus.connect(nats.url, "runner", 15)
    await bus.ensure()
    if resume:
        spec = await existing_spec(bus, resume)
    else:
        spec = rf.spec()
        spec = spec.model_copy(update={"run_id": spec.run_id or new_run_id()})
    run_dir = home / "runs" / spec.run_id
    out_dir = Path(rf.runner.out_dir) if rf.runner.out_dir else run_dir
    run_dir.mkdir(parents=True, exist_ok=True)
    prepare_tasks(spec)
    sections = service_sections(rf, spec, nats.url, free_port(), run_dir)
    if not spec.train:
        sections.pop("learner")
    validate_sections(sections)
    paths = write_configs(sections, run_dir)
    sup = Supervisor(run_dir, rf.runner.max_restarts, rf.runner.restart_services, rf.runner.stuck_after_s)
    env = {"TREEGRPO_HOME": str(home), "TREEGRPO_NATS_URL": nats.url,
           "OMP_WAIT_POLICY": os.environ.get("OMP_WAIT_POLICY", "PASSIVE")}
    for name in paths:
        if not rf.runner.attach:
            sup.add_service(name, paths[name], env, heartbeat_path(name, root=run_dir))
    progress = Progress(spec.tasks, spec.rounds, spec.train)
    stop = asyncio.Event()
    outcome = "failed"
    watcher = asyncio.create_task(_watch_forever(bus, spec.run_id, progress, stop))
    try:
        sup.start_all()
        await _publish_start(bus, spec)
        console.print(f"[bold]run {spec.run_id}[/] — {len(spec.tasks)} task(s) × {spec.rounds} round(s), "
                      f"E={spec.tree.expansions} G={spec.tree.group_size}, train={spec.train}, "
                      f"max_staleness={spec.max_staleness}; logs in {run_dir / 'logs'}")
        outcome = await _supervise(rf, sup, nats, progress, console)
    except (KeyboardInterrupt, asyncio.CancelledError):
        outcome = "stopped"
    finally:
        stop.set()
        sup.stop_all(rf.runner.stop_grace_s)
        with contextlib.suppress(Exception):
            await watcher
    if outcome == "completed":
        await bus.publish(ev_mod.make_event(spec.run_id, "runner", pb.RunCompleted(outcome="completed")))
        if not await _export_and_report(rf, bus, spec.run_id, out_dir, console):
            outcome = "export_failed"
    elif outcome == "stopped":
        console.print(f"[yellow]stopped.[/] resume with: [bold]treegrpo run --resume {spec.run_id}[/]")
    await bus.close()
    nats.close()
    return RunResult(spec.run_id, outcome, progress, out_dir, run_dir)


def prepare_tasks(spec: RunSpec) -> None:
    """Generate the built-in tasks once (a cache); MLE-bench tasks come from their data roots."""
    from services.grader.tasks import ensure_builtin_tasks

    ensure_builtin_tasks()


async def _watch_forever(bus: Bus, run_id: str, progress: Progress, stop: asyncio.Event) -> None:
    """The watcher re-subscribes after a NATS restart; `progress` ignores facts it already saw."""
    while not stop.is_set():
        try:
            await watch(bus, run_id, progress, stop)
        except Exception as exc:  # server restarts, slow consumers: start over, dedup by id
            log.debug("watcher restarting after %s", exc)
            await asyncio.sleep(0.5)


async def _supervise(rf: RunFile, sup: Supervisor, nats: NatsHandle, progress: Progress,
                     console: Console) -> str:
    deadline = time.time() + rf.runner.timeout_s if rf.runner.timeout_s else float("inf")
    services = lambda: {n: (p.alive, p.restarts, sup.state(p)) for n, p in sup.procs.items()}  # noqa: E731
    with Live(progress.table(services()), console=console, refresh_per_second=2,
              transient=False, auto_refresh=rf.runner.live) as live:
        while True:
            await asyncio.sleep(0.5)
            for note in filter(None, [nats.check(), *sup.check()]):
                console.print(f"[yellow]{note}[/]")
            live.update(progress.table(services()))
            if sup.gave_up:
                console.print(f"[red]gave up on {', '.join(sup.gave_up)}; see {sup.run_dir / 'logs'}[/]")
                return "failed"
            if await _finish_step(progress, rf):
                return "completed"
            if time.time() > deadline:
                console.print(f"[red]run exceeded timeout_s={rf.runner.timeout_s}[/]")
                return "failed"


async def _export_and_report(rf: RunFile, bus: Bus, run_id: str, out_dir: Path, console: Console) -> bool:
    """False when the export breaks one of the seed's invariants (the files stay for inspection)."""
    if rf.runner.export:
        from treegrpo.archive import ArchiveInvariantError, export_runs

        try:
            export_runs_result = await export_runs(bus, [run_id], out_dir / "export")
        except ArchiveInvariantError as exc:
            console.print(f"[red]export broke the seed's invariants:[/] {exc}")
            return False
        r = export_runs_result[0]
        console.print(f"[green]exported[/] {r.nodes} nodes in {r.rounds} task-rounds ({r.bytes / 1e6:.1f} MB) "
                      f"as the seed's data root: {r.path}")
    if rf.runner.report:
        from treegrpo.report import build_report

        await build_report(bus, [run_id], out_dir / "report")
        console.print(f"[green]report[/]: {out_dir / 'report' / 'report.md'}")
    return True
