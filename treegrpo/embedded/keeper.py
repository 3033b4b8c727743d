"""The keeper of a $TREEGRPO_HOME's nats-server: `python -m treegrpo.embedded.keeper NATS_DIR PORT [STORE]`.

Started by the first process that takes a lease (`SharedNats.acquire`), in a session of its own, so
it outlives that process; nats-server is its child and dies with it (PR_SET_PDEATHSIG). It

- restarts nats-server when it dies (same port, same store: the services' URLs stay valid);
- reads the server's log lines from a pipe (not from the log file: on a full disk that file may not
  be written) and records a store write error ("no space left on device") in keeper.json at once;
- after write errors, restarts the server once `RECOVER_FREE_MB` are free under the store again:
  nats-server (2.15) keeps a stream that hit a write error failing every later write, even after
  space came back, until it restarts (tests/e2e/test_bus_faults.py shows both);
- stops the server and exits when no live lease is left (checked every `LEASE_CHECK_S`), which
  also covers users killed with SIGKILL; SIGTERM (the last `release()`) stops it at once.
"""

from __future__ import annotations

import logging
import os
import shutil
import signal
import sys
import threading
import time
from pathlib import Path

from treegrpo._proc import start_time
from treegrpo.embedded._server import EmbeddedNats, EmbeddedNatsError
from treegrpo.embedded._state import (
    KeeperState,
    NatsPaths,
    live_leases,
    locked,
    read_state,
    write_atomic,
    write_state,
)

log = logging.getLogger("treegrpo.keeper")
TURN_S = 0.25
LEASE_CHECK_S = 1.0
RECOVER_FREE_MB = 64.0  # a store with less than this free would fail again at once
RESTART_BACKOFF_S = (1.0, 5.0, 15.0, 30.0)  # between restarts that did not hold
WRITE_ERRORS = (
    "no space left on device",
    "critical write error",
    "insufficient resources",
    "disk quota exceeded",
    "read-only file system",
    "out of resources",
    "input/output error",
)


class Keeper:
    def __init__(self, paths: NatsPaths, port: int, store: Path):
        self.paths = paths
        self.server = EmbeddedNats(store, port=port, pipe_output=True)
        self.stop = threading.Event()
        self.state = KeeperState(
            pid=os.getpid(),
            started=start_time(os.getpid()) or 0,
            url=self.server.url,
            port=port,
            store=str(store),
            recover_free_mb=RECOVER_FREE_MB,
        )
        self._failed_starts = 0
        self._retry_at = 0.0
        self._next_lease_check = 0.0
        self._saved = ""

    # ---- the server ---------------------------------------------------------------------------
    def start_server(self) -> None:
        self.server.start()
        self.state.server_pid = self.server.proc.pid
        self.state.server_started = start_time(self.server.proc.pid) or 0
        threading.Thread(target=self._read_log, args=(self.server.proc,), daemon=True).start()

    def _read_log(self, proc) -> None:
        """The server's output, line by line: into its log file (best effort), write errors noted."""
        try:
            sink = open(self.server.log_file, "ab", buffering=0)
        except OSError:
            sink = None
        for raw in iter(proc.stdout.readline, b""):
            if sink is not None:
                try:
                    sink.write(raw)
                except OSError:  # the disk the log is on is full: the pipe still tells us
                    pass
            line = raw.decode(errors="replace").strip()
            current = proc is self.server.proc  # a restarted server's last words are history
            if current and any(p in line.lower() for p in WRITE_ERRORS) and not self.state.write_error:
                self.state.write_error = line.split("] ", 1)[-1][:400]
                self.state.write_error_since = time.time()
                log.error("store write error: %s", self.state.write_error)

    def _restart(self, why: str) -> None:
        self.server.stop()
        try:
            self.start_server()
        except (EmbeddedNatsError, OSError) as exc:
            self._failed_starts += 1
            backoff = RESTART_BACKOFF_S[min(self._failed_starts, len(RESTART_BACKOFF_S)) - 1]
            self._retry_at = time.monotonic() + backoff
            self.state.server_down = f"nats-server could not start again ({exc}); next try in {backoff:.0f}s"
            log.error("%s", self.state.server_down)
            return
        self._failed_starts = 0
        self._retry_at = time.monotonic() + RESTART_BACKOFF_S[0]
        self.state.server_down = ""
        self.state.write_error, self.state.write_error_since = "", 0.0
        self.state.restarts += 1
        self.state.last_restart = why
        log.warning("restarted nats-server (pid %d): %s", self.server.proc.pid, why)

    # ---- the loop -----------------------------------------------------------------------------
    def turn(self) -> bool:
        """One look around; False once no lease is left (the server is then stopped)."""
        now = time.monotonic()
        proc = self.server.proc
        if proc is not None and proc.poll() is not None and not self.state.server_down:
            self._restart(f"nats-server exited ({proc.returncode}); same port, same store")
        elif self.state.server_down and now >= self._retry_at:
            self._restart("it could not start at the last try")
        if self.state.write_error:
            self.state.free_mb = _free_mb(Path(self.state.store))
            if self.state.free_mb >= RECOVER_FREE_MB and now >= self._retry_at:
                self._restart(
                    f"after its store's write errors, now that {self.state.free_mb:,.0f} MB are free"
                )
        if now >= self._next_lease_check:
            self._next_lease_check = now + LEASE_CHECK_S
            if self._idle_stop():
                return False
        self._save()
        return True

    def _idle_stop(self) -> bool:
        """No live lease: stop under the lock, so no new user attaches to a server going away."""
        with locked(self.paths, wait_s=0) as held:
            if not held or live_leases(self.paths):
                return False
            log.info("no lease left; stopping nats-server")
            self.shutdown()
            return True

    def _save(self) -> None:
        text = self.state.model_dump_json(exclude={"updated_at"})
        if text != self._saved:  # only on change: a file rewritten four times a second for nothing
            self.state.updated_at = time.time()
            try:
                write_state(self.paths, self.state)
                self._saved = text
            except OSError as exc:  # keeps the state in memory and tries again next turn
                log.error("cannot write %s: %s", self.paths.state, exc)

    def shutdown(self) -> None:
        self.server.stop()
        current = read_state(self.paths)
        if current is None or current.pid == os.getpid():  # a newer keeper's files are not ours
            self.paths.state.unlink(missing_ok=True)
            self.paths.url.unlink(missing_ok=True)

    def run(self) -> int:
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda *_: self.stop.set())
        try:
            self.start_server()
        except (EmbeddedNatsError, OSError) as exc:
            log.error("nats-server did not start: %s", exc)
            return 1
        try:  # keeper.json made now, while there is space: later rewrites of it need none
            write_state(self.paths, self.state)
            write_atomic(self.paths.url, self.server.url + "\n")
        except OSError as exc:
            log.error("cannot write %s: %s", self.paths.root, exc)
            self.server.stop()
            return 1
        log.info("nats-server %s (pid %d) for %s", self.server.url, self.server.proc.pid, self.paths.root)
        while not self.stop.wait(TURN_S):
            try:
                if not self.turn():
                    return 0
            except Exception:  # a bug here must not take the server (and every run on it) down
                log.exception("keeper turn failed; going on")
        log.info("asked to stop; stopping nats-server")
        self.shutdown()
        return 0


def _free_mb(folder: Path) -> float:
    try:
        return shutil.disk_usage(folder).free / 1e6
    except OSError:
        return -1.0


def main(argv: list[str]) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s keeper[%(process)d] %(message)s")
    root, port = Path(argv[0]), int(argv[1])
    paths = NatsPaths(root)
    return Keeper(paths, port, Path(argv[2]) if len(argv) > 2 else paths.store).run()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
