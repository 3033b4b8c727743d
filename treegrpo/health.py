"""Service heartbeats: what `treegrpo health --heartbeat` (the Kubernetes and compose probes) reads.

A probe that only asks NATS whether it is up says nothing about the service: a process whose event
loop is blocked (a synchronous call in a handler, a deadlock) or whose consumer loop died keeps
NATS happy forever. So every service rewrites a small JSON file from its own event loop every
`health.interval_s`, with the time its consumer loop last went round and its own view of the NATS
connection. Liveness: the file is fresh, the consumer loop is turning, the process is alive.
Readiness adds: the service's NATS connection is up.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from treegrpo.config import treegrpo_home


class Heartbeat(BaseModel):
    """One service's view of itself, as of `written_at` (unix seconds)."""

    model_config = ConfigDict(extra="forbid")

    service: str
    instance: str
    pid: int
    written_at: float
    state: str  # "starting" (loading) | "running" | "stopping" (draining) | "stopped" | "failed"
    nats_connected: bool
    consumer_loop_at: float  # when the fetch loop last began a turn (0: not yet)
    inflight: int  # handlers running now
    processed: int
    dead_lettered: int
    errors: int = 0  # handler or work failures so far (retried or dead-lettered)
    last_error: str = ""  # the newest one, for the runner's progress view
    failure: str = ""  # state "failed": the permanent fault it stopped on (not restarted)
    bus_error: str = ""  # its writes to the bus fail since `bus_error_since` ("": they go through)
    bus_error_since: float = 0.0


def health_dir(root: Path | None = None) -> Path:
    """Where heartbeats live by default: `<root>/health`, root = $TREEGRPO_HOME (a run's folder for
    the runner's services)."""
    return (root or treegrpo_home()) / "health"


def heartbeat_path(service: str, configured: str = "", root: Path | None = None) -> Path:
    return Path(configured).expanduser() if configured else health_dir(root) / f"{service}.json"


def write_heartbeat(path: Path, beat: Heartbeat) -> None:
    """Atomically (a probe never reads half a file)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(beat.model_dump_json())
    tmp.replace(path)


def read_heartbeat(path: Path) -> Heartbeat:
    return Heartbeat.model_validate(json.loads(path.read_text()))


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by someone else
        return True
    return True


def problems(beat: Heartbeat, max_age_s: float, ready: bool = False, now: float | None = None) -> list[str]:
    """Why this heartbeat is unhealthy (empty: healthy). The probe runs beside the service (in its
    container, or the runner on its host), so the service's pid can be checked."""
    now = time.time() if now is None else now
    out = []
    if beat.state in ("stopped", "failed") or (ready and beat.state != "running"):
        # starting/stopping: alive, not ready; failed: with the reason it stopped for
        out.append(f"{beat.service} is {beat.state}" + (f": {beat.failure}" if beat.failure else ""))
    age = now - beat.written_at
    if age > max_age_s:
        out.append(
            f"{beat.service} heartbeat is {age:.0f}s old (> {max_age_s:.0f}s): "
            "its event loop is blocked or it died"
        )
    loop_age = now - beat.consumer_loop_at if beat.consumer_loop_at else age
    if beat.state == "running" and loop_age > max_age_s:
        out.append(f"{beat.service} consumer loop last turned {loop_age:.0f}s ago (> {max_age_s:.0f}s)")
    if not _pid_alive(beat.pid):
        out.append(f"{beat.service} process {beat.pid} is gone")
    if ready and not beat.nats_connected:
        out.append(f"{beat.service} is not connected to NATS")
    return out


def check_files(paths: list[Path], max_age_s: float, ready: bool) -> list[str]:
    """Problems of every heartbeat file given (a missing or unreadable one is a problem)."""
    if not paths:
        return [f"no heartbeat file under {health_dir()}"]
    out = []
    for p in paths:
        try:
            out += problems(read_heartbeat(p), max_age_s, ready)
        except (OSError, ValueError) as exc:
            out.append(f"cannot read heartbeat {p}: {exc}")
    return out


def read_heartbeats(paths: list[Path]) -> list[Heartbeat]:
    """The heartbeats that can be read (`check_files` reports the others)."""
    out = []
    for p in paths:
        try:
            out.append(read_heartbeat(p))
        except (OSError, ValueError):
            continue
    return out
