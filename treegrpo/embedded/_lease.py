"""One embedded nats-server per $TREEGRPO_HOME, shared by every process that uses it.

A run (`treegrpo run`, `demo`, each arm of `--control`), `treegrpo report|events|tail|export` and
`treegrpo nats up` each hold a lease while they use the server; the server stays up while any lease
is live and goes away after the last one, whichever process started it:

- `acquire()`, under the home's lock (fcntl.flock): prune the leases of dead processes, write ours,
  and attach to the running keeper, or start one (`keeper.py`) and wait until its server listens.
  Two runs started in the same second queue on the lock: the second finds the first's server.
- `release()`, under the lock: remove our lease; if none is live, stop the keeper (SIGTERM) and
  wait until it and nats-server are gone, so the store is free when `treegrpo run` exits.
- a user killed with SIGKILL leaves a lease of a dead process: the keeper prunes it within a second
  and, if it was the last, stops the server itself; `check()` (every turn of the runner) starts a
  new keeper on the same port if the keeper itself was killed.

Why a keeper process and not "the first run owns the server": the first run may end first (issue
25: run A stopped the server under run B); and a server no process owns outlives everyone killed
with SIGKILL. docs/ARCHITECTURE.md ("One embedded NATS per home") has the whole picture.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from treegrpo._proc import running
from treegrpo.config import treegrpo_home
from treegrpo.embedded._server import EmbeddedNatsError, free_port
from treegrpo.embedded._state import (
    KeeperState,
    Lease,
    NatsPaths,
    add_lease,
    keeper_running,
    live_leases,
    locked,
    read_state,
    write_atomic,
)

KEEPER_START_S = 30.0
KEEPER_STOP_S = 20.0
_children: dict[int, subprocess.Popen] = {}  # keepers this process started: reaped when they exit


class SharedNats:
    """A lease on the home's embedded nats-server. `url` is valid between acquire and release."""

    def __init__(self, home: Path | None = None, what: str = ""):
        self.paths = NatsPaths((home or treegrpo_home()) / "nats")
        self.what = what or " ".join(["treegrpo", *sys.argv[1:3]])
        self.url = ""
        self._lease: Path | None = None
        self._restarts_seen = 0

    def acquire(self, port: int = 0, store: Path | None = None) -> str:
        with locked(self.paths) as held:
            if not held:
                raise EmbeddedNatsError(f"{self.paths.lock} stayed locked for a minute; is a treegrpo hung?")
            live_leases(self.paths)  # prune
            try:
                self._lease = add_lease(self.paths, self.what)
            except OSError as exc:  # a full or read-only disk under the home
                raise EmbeddedNatsError(f"cannot take a lease on {self.paths.root}: {exc}") from exc
            try:
                state = read_state(self.paths)
                if not keeper_running(state):
                    state = self._start_keeper(port, store)
            except BaseException:
                self._lease.unlink(missing_ok=True)
                self._lease = None
                raise
        self.url, self._restarts_seen = state.url, state.restarts
        return self.url

    def label(self, what: str, run_id: str = "") -> None:
        """Say who holds the lease (`treegrpo health` lists them), e.g. once the run id is known."""
        if self._lease is not None and self._lease.exists():
            lease = Lease.model_validate_json(self._lease.read_text())
            update = {"what": what, "run_id": run_id}
            with contextlib.suppress(OSError):  # a full disk: the lease holds all the same
                write_atomic(self._lease, lease.model_copy(update=update).model_dump_json())

    def state(self) -> KeeperState | None:
        return read_state(self.paths)

    def check(self) -> list[str]:
        """Notes for the screen: the server restarted, or the keeper was gone and started again."""
        state = read_state(self.paths)
        if not keeper_running(state):
            try:
                return self._restart_keeper()
            except (EmbeddedNatsError, OSError) as exc:  # the run's fault watch says the bus is down
                return [f"the embedded NATS keeper is gone and did not start again: {exc}"]
        notes = []
        if state.restarts > self._restarts_seen:
            notes.append(f"the embedded nats-server was restarted ({state.last_restart}); nothing is lost")
        self._restarts_seen = state.restarts
        return notes

    def _restart_keeper(self) -> list[str]:
        with locked(self.paths) as held:
            state = read_state(self.paths)
            if not held or keeper_running(state):  # another user of the home was quicker
                return []
            old = state.port if state else 0
            state = self._start_keeper(old, Path(state.store) if state else None)
            return [f"the embedded NATS keeper was gone; started it again at {state.url}"]

    def release(self) -> None:
        if self._lease is None:
            return
        with locked(self.paths) as held:
            self._lease.unlink(missing_ok=True)
            self._lease = None
            if held and not live_leases(self.paths):
                self._stop_keeper()

    def __enter__(self) -> SharedNats:
        self.acquire()
        return self

    def __exit__(self, *exc) -> None:
        self.release()

    # ---- under the lock -----------------------------------------------------------------------
    def _start_keeper(self, port: int, store: Path | None) -> KeeperState:
        self._stop_keeper()  # what a dead keeper left: its server may still be exiting on our store
        port = port if port and _port_free(port) else free_port()
        argv = [sys.executable, "-m", "treegrpo.embedded.keeper", str(self.paths.root), str(port)]
        self.paths.root.mkdir(parents=True, exist_ok=True)
        with open(self.paths.keeper_log, "ab") as log:
            proc = subprocess.Popen(
                argv + ([str(store)] if store else []),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # not ours to take down: no Ctrl-C of this terminal reaches it
            )
        _children[proc.pid] = proc
        deadline = time.monotonic() + KEEPER_START_S
        while time.monotonic() < deadline:
            state = read_state(self.paths)
            if state is not None and state.pid == proc.pid:
                return state
            if proc.poll() is not None:
                raise EmbeddedNatsError(f"the embedded NATS did not start; see {self.paths.keeper_log}")
            time.sleep(0.05)
        _kill(proc.pid, signal.SIGKILL)
        raise EmbeddedNatsError(f"the embedded NATS did not start in {KEEPER_START_S:.0f}s")

    def _stop_keeper(self) -> None:
        state = read_state(self.paths)
        if state is not None:
            if running(state.pid, state.started):
                _stop(state.pid, state.started)
            if running(state.server_pid, state.server_started or None):  # dies with the keeper; wait
                _stop(state.server_pid, state.server_started or None)
        self.paths.state.unlink(missing_ok=True)
        self.paths.url.unlink(missing_ok=True)


def _stop(pid: int, started: int | None) -> None:
    """SIGTERM, wait, SIGKILL: the process is gone when this returns."""
    _kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + KEEPER_STOP_S
    while _alive(pid, started) and time.monotonic() < deadline:
        time.sleep(0.05)
    if _alive(pid, started):
        _kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + 5
        while _alive(pid, started) and time.monotonic() < deadline:
            time.sleep(0.05)


def _alive(pid: int, started: int | None) -> bool:
    child = _children.get(pid)
    if child is not None and child.poll() is not None:  # our child: reaped here, not left a zombie
        _children.pop(pid, None)
        return False
    return running(pid, started)


def _kill(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass


def _port_free(port: int) -> bool:
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as nats-server binds: TIME_WAIT is free
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True
