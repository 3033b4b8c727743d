"""Service processes: start, watch, restart on death, stop by PID.

Each service is its own process (`python -m treegrpo.cli serve NAME --config FILE`), so a crash
or a kill of one is survivable: the supervisor starts it again, and the service resumes from its
durable consumer position. PIDs are written to `<run_dir>/pids.json` (the fault-injection tests
read it to kill services at random moments). A service that exits with a permanent code (it said
so: a missing model, a bad config, no good checkpoint) is not restarted; `failures` holds why, from
its heartbeat or the last line of its log, and the runner stops the run with it.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from treegrpo._proc import die_with_parent
from treegrpo.health import Heartbeat, problems, read_heartbeat

PERMANENT_EXITS = (2, 78)  # a usage/config error, or treegrpo.service.EXIT_PERMANENT
ERRORS_SHOWN_AFTER = 3  # a service's errors are shown once this many piled up since the last note


@dataclass
class Proc:
    name: str
    argv: list[str]
    log_path: Path
    env: dict[str, str] = field(default_factory=dict)
    health_file: Path | None = None  # the service's heartbeat (treegrpo/health.py)
    proc: subprocess.Popen | None = None
    restarts: int = 0
    started_at: float = 0.0
    errors_noted: int = 0  # the heartbeat's error count at the last note on screen

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None


class Supervisor:
    def __init__(
        self, run_dir: Path, max_restarts: int = 50, restart: bool = True, stuck_after_s: float = 0.0
    ):
        self.run_dir = run_dir
        self.max_restarts = max_restarts
        self.restart = restart
        self.stuck_after_s = stuck_after_s
        self.procs: dict[str, Proc] = {}
        self.gave_up: list[str] = []
        self.failures: dict[str, str] = {}  # service -> the permanent fault it exited with

    def add_service(
        self, name: str, config_path: Path, env: dict[str, str], health_file: Path | None = None
    ) -> None:
        argv = [sys.executable, "-m", "treegrpo.cli", "serve", name, "--config", str(config_path)]
        self.procs[name] = Proc(name, argv, self.run_dir / "logs" / f"{name}.log", env, health_file)

    def _spawn(self, p: Proc) -> None:
        try:
            p.log_path.parent.mkdir(parents=True, exist_ok=True)
            log = open(p.log_path, "ab")
            log.write(f"\n==== start {time.strftime('%H:%M:%S')} (restart {p.restarts}) ====\n".encode())
            log.flush()
        except OSError:  # a full disk: the service runs all the same, unlogged, rather than not at all
            log = open(os.devnull, "wb")
        p.proc = subprocess.Popen(
            p.argv,
            stdout=log,
            stderr=subprocess.STDOUT,
            env={**os.environ, **p.env},
            start_new_session=True,
            preexec_fn=die_with_parent(),
        )
        p.started_at = time.time()
        p.errors_noted = 0  # a new process counts its errors from zero
        log.close()
        self._write_pids()

    def start_all(self) -> None:
        for p in self.procs.values():
            self._spawn(p)

    def check(self) -> list[str]:
        """Restart dead services; returns lines describing what happened."""
        notes = []
        for p in self.procs.values():
            stuck = self._stuck(p)
            if stuck:  # alive but not working: what a Kubernetes liveness probe would do
                notes.append(f"{p.name} is stuck ({stuck}); killing it")
                p.proc.kill()
                p.proc.wait(10)
            if p.alive or p.name in self.gave_up:
                continue
            code = p.proc.returncode if p.proc else None
            if code in PERMANENT_EXITS:
                self.gave_up.append(p.name)
                self.failures[p.name] = self._why(p)
                notes.append(f"{p.name} failed permanently: {self.failures[p.name]}")
                continue
            if not self.restart or p.restarts >= self.max_restarts:
                self.gave_up.append(p.name)
                notes.append(f"{p.name} exited ({code}); not restarting")
                continue
            p.restarts += 1
            notes.append(f"{p.name} exited ({code}); restart #{p.restarts}")
            self._spawn(p)
        return notes

    def _why(self, p: Proc) -> str:
        """The reason a service gave for its permanent exit: its heartbeat's, else its log's last line."""
        try:
            beat = read_heartbeat(p.health_file) if p.health_file else None
        except (OSError, ValueError):
            beat = None
        if beat is not None and beat.pid == p.proc.pid and beat.failure:
            return beat.failure
        try:
            lines = [ln for ln in p.log_path.read_text(errors="replace").splitlines() if ln.strip()]
        except OSError:
            lines = []
        return lines[-1][-500:] if lines else f"exit code {p.proc.returncode}"

    def error_notes(self) -> list[str]:
        """Services that keep failing at their work (retries, dead letters, failed groups), each
        shown again only after more errors piled up: what a person should see without reading logs."""
        notes = []
        for p in self.procs.values():
            beat = self._own_beat(p)
            if beat is None or beat.errors - p.errors_noted < ERRORS_SHOWN_AFTER:
                continue
            notes.append(f"{p.name}: {beat.errors} errors so far, the last: {beat.last_error}")
            p.errors_noted = beat.errors
        return notes

    def beats(self) -> list[Heartbeat]:
        """The live services' own heartbeats (what the fault watch reads)."""
        return [b for b in map(self._own_beat, self.procs.values()) if b is not None]

    def _own_beat(self, p: Proc) -> Heartbeat | None:
        """The live process's own heartbeat; None before it wrote one (the file may still be the
        previous process's) or while the file is torn."""
        if not (p.alive and p.health_file):
            return None
        try:
            beat = read_heartbeat(p.health_file)
        except (OSError, ValueError):
            return None
        return beat if beat.pid == p.proc.pid else None

    def state(self, p: Proc) -> str:
        """What the progress table shows: the heartbeat's state and handled count ('starting'
        before the process has beaten, 'exited' when it is gone)."""
        if not p.alive:
            return "exited"
        beat = self._own_beat(p)
        if beat is None:
            return "starting"
        return f"{beat.state}, {beat.processed} handled" if beat.state == "running" else beat.state

    def _stuck(self, p: Proc) -> str:
        """Why this live service counts as stuck ('' if it does not): its own heartbeat is older
        than `stuck_after_s`. One that says `stopped` or `failed` is exiting, not stuck."""
        beat = self._own_beat(p) if self.stuck_after_s else None
        if beat is None or beat.state in ("stopped", "failed"):
            return ""
        return "; ".join(problems(beat, self.stuck_after_s))

    def stop_all(self, grace_s: float = 20.0) -> None:
        for p in self.procs.values():
            if p.alive:
                p.proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + grace_s
        for p in self.procs.values():
            if p.proc is None:
                continue
            try:
                p.proc.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                p.proc.kill()
                p.proc.wait(5)
        self._write_pids()

    def pids(self) -> dict[str, int]:
        return {n: p.proc.pid for n, p in self.procs.items() if p.alive}

    def _write_pids(self) -> None:
        path = self.run_dir / "pids.json"
        tmp = path.with_suffix(".tmp")
        try:
            tmp.write_text(json.dumps(self.pids()))
            tmp.replace(path)
        except OSError:  # a full disk: the file is for fault-injection tests, not for the run
            tmp.unlink(missing_ok=True)
