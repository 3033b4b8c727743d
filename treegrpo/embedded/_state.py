"""The files through which the processes of one $TREEGRPO_HOME share its embedded nats-server.

    $TREEGRPO_HOME/nats/lock           flock'd around every start, attach, release, restart, idle stop
    $TREEGRPO_HOME/nats/leases/*.json  one per user of the server (a run, `treegrpo report`, `nats up`)
    $TREEGRPO_HOME/nats/keeper.json    the keeper's state (KeeperState), rewritten as it changes
    $TREEGRPO_HOME/nats/url            the URL, for `resolve_nats_url` and `treegrpo serve`
    $TREEGRPO_HOME/nats/data/          the JetStream store, nats-server.pid, nats-server.log
    $TREEGRPO_HOME/nats/keeper.log     what the keeper did (starts, restarts, write errors, idle stop)

Every process is named by its pid and start time (`treegrpo._proc.start_time`), so a lease of a
process that died (SIGKILL, OOM) reads as stale even after the kernel reused its pid.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import secrets
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from treegrpo._proc import running, start_time

LOCK_WAIT_S = 60.0  # a holder does at most a server start or stop under the lock (seconds)
STATE_BYTES = 4096  # keeper.json's fixed size (its fields are capped well below)


class KeeperState(BaseModel):
    """What the keeper of the home's nats-server says about it (keeper.json)."""

    model_config = ConfigDict(extra="forbid")

    pid: int  # the keeper's
    started: int  # the keeper's start time (clock ticks since boot)
    url: str
    port: int
    store: str  # the JetStream store folder
    server_pid: int = 0
    server_started: int = 0
    restarts: int = 0  # times the keeper restarted nats-server (it died, or its store hit write errors)
    last_restart: str = ""  # why, the latest time
    write_error: str = ""  # the store's write error while it lasts ("": writes work as far as it knows)
    write_error_since: float = 0.0
    free_mb: float = -1.0  # free space under the store at the last check (-1: not checked)
    recover_free_mb: float = 0.0  # after write errors, the server restarts once this much is free
    server_down: str = ""  # nats-server is down and the keeper could not start it again: why
    updated_at: float = 0.0


class Lease(BaseModel):
    """One user of the server: while its process lives, the server stays up."""

    model_config = ConfigDict(extra="forbid")

    pid: int
    started: int
    what: str  # for `treegrpo health`: "treegrpo run 20261201_101500_ab12cd"
    since: float
    run_id: str = ""  # the run this process runs, once it knows (its services' heartbeats are there)


@dataclass(frozen=True)
class NatsPaths:
    root: Path  # $TREEGRPO_HOME/nats

    @property
    def lock(self) -> Path:
        return self.root / "lock"

    @property
    def leases(self) -> Path:
        return self.root / "leases"

    @property
    def state(self) -> Path:
        return self.root / "keeper.json"

    @property
    def url(self) -> Path:
        return self.root / "url"

    @property
    def store(self) -> Path:
        return self.root / "data"

    @property
    def keeper_log(self) -> Path:
        return self.root / "keeper.log"


def write_atomic(path: Path, text: str) -> None:
    """Readers never see half a file (tmp + rename in the same folder)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text)
    tmp.replace(path)


def write_state(paths: NatsPaths, state: KeeperState) -> None:
    """Rewrite keeper.json in place, padded to `STATE_BYTES`, under an exclusive flock: once it
    exists, rewriting it takes no new disk space, so the keeper can still say "disk full" when the
    disk is full (a tmp file + rename would need space, and fail just then). Readers take a shared
    flock, so they never see half a write."""
    data = state.model_dump_json().encode()
    data += b" " * (STATE_BYTES - 1 - len(data)) + b"\n"  # JSON allows trailing whitespace
    fd = os.open(paths.state, os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        os.pwrite(fd, data, 0)
    finally:
        os.close(fd)  # closing drops the flock


def read_state(paths: NatsPaths) -> KeeperState | None:
    try:
        fd = os.open(paths.state, os.O_RDONLY)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH)
        raw = os.pread(fd, 1 << 16, 0)
    except OSError:
        return None
    finally:
        os.close(fd)
    try:
        return KeeperState.model_validate_json(raw)
    except ValueError:
        return None


def keeper_running(state: KeeperState | None) -> bool:
    return state is not None and running(state.pid, state.started)


@contextlib.contextmanager
def locked(paths: NatsPaths, wait_s: float = LOCK_WAIT_S) -> Iterator[bool]:
    """Hold the home's NATS lock; yields False when `wait_s` passed without it (0: try once)."""
    paths.root.mkdir(parents=True, exist_ok=True)
    with open(paths.lock, "a+") as fh:
        deadline = time.monotonic() + wait_s
        while True:
            try:
                fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    yield False
                    return
                time.sleep(0.05)
        try:
            yield True
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def add_lease(paths: NatsPaths, what: str) -> Path:
    """This process's lease (a process may hold several: `--control` holds one over both arms)."""
    pid = os.getpid()
    lease = Lease(pid=pid, started=start_time(pid) or 0, what=what, since=time.time())
    path = paths.leases / f"{pid}-{lease.started}-{secrets.token_hex(3)}.json"
    write_atomic(path, lease.model_dump_json())
    return path


def live_leases(paths: NatsPaths, prune: bool = True) -> list[Lease]:
    """The leases whose process still runs; with `prune`, the others' files are removed (call it
    under the lock when pruning)."""
    out = []
    for path in sorted(paths.leases.glob("*.json")) if paths.leases.exists() else []:
        try:
            lease = Lease.model_validate(json.loads(path.read_text()))
        except (OSError, ValueError):
            lease = None
        if lease is not None and running(lease.pid, lease.started or None):
            out.append(lease)
        elif prune:
            path.unlink(missing_ok=True)
    return out
