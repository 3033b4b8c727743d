"""The compose stack under podman, for tests/stack/ and benchmarks/stack_numbers.py (not a test module).

`Stack` starts podman's Docker-API service on a private socket, runs the real docker compose v2
binary against it (DOCKER_HOST) with deploy/compose.yaml + compose.cpu.yaml + this folder's
compose.test.yaml, and drives the containers' healthchecks (`HealthDriver`). Every process it
starts is stopped by its pid in `close()`; `down()` removes the containers and volumes.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import threading
import time
from pathlib import Path

from tests._compose import compose_cmd
from treegrpo.embedded import free_port

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
STACK_DIR = Path(os.environ.get("TREEGRPO_STACK_DIR", "/var/tmp/treegrpo-stack"))
PROJECT = "treegrpo"
SERVICES = ("sampler", "executor", "grader", "learner")
FILES = (DEPLOY / "compose.yaml", DEPLOY / "compose.cpu.yaml", Path(__file__).with_name("compose.test.yaml"))


def env_file_values(path: Path) -> dict[str, str]:
    pairs = (line.split("=", 1) for line in path.read_text().splitlines() if "=" in line and line[0] != "#")
    return {k: v for k, v in pairs}


class HealthDriver(threading.Thread):
    """What podman's systemd timer would do: run each container's healthcheck at its interval.

    podman schedules healthchecks with transient systemd timers; on a host without systemd (this
    one, most CI containers) no check ever runs, a container stays `starting` and compose's
    `depends_on: condition: service_healthy` waits forever. This thread runs `podman healthcheck
    run` for every running container of the project, first `interval` after it started, then every
    `interval`, one check at a time per container, as the engine would."""

    def __init__(self) -> None:
        super().__init__(daemon=True, name="health-driver")
        self.stopping = threading.Event()
        self.due: dict[str, float] = {}
        self.busy: set[str] = set()
        self.intervals: dict[str, float | None] = {}
        self.checks = 0

    def run(self) -> None:
        while not self.stopping.wait(1.0):
            try:
                self._tick()
            except (subprocess.SubprocessError, json.JSONDecodeError, OSError):
                continue  # containers come and go under us; the next tick looks again

    def _tick(self) -> None:
        out = subprocess.run(
            ["podman", "ps", "--filter", f"label=com.docker.compose.project={PROJECT}", "--format", "json"],
            capture_output=True,
            text=True,
            timeout=30,
        ).stdout
        now = time.time()
        for c in json.loads(out or "[]"):
            cid, interval = c["Id"], self._interval(c["Id"])
            if interval is None or cid in self.busy:
                continue
            started = float(c.get("StartedAt") or now)
            due = self.due.get(cid, 0.0)
            if due < started:  # a (re)started container: its first check one interval after the start
                due = self.due[cid] = started + interval
            if now >= due:
                self.due[cid] = now + interval
                self.busy.add(cid)
                threading.Thread(target=self._check, args=(cid,), daemon=True).start()

    def _interval(self, cid: str) -> float | None:
        if cid not in self.intervals:
            res = subprocess.run(["podman", "inspect", cid], capture_output=True, text=True, timeout=30)
            health = (json.loads(res.stdout or "[{}]")[0].get("Config") or {}).get("Healthcheck") or {}
            self.intervals[cid] = health.get("Interval", 0) / 1e9 or None  # JSON: nanoseconds
        return self.intervals[cid]

    def _check(self, cid: str) -> None:
        try:
            subprocess.run(["podman", "healthcheck", "run", cid], capture_output=True, timeout=120)
            self.checks += 1
        except subprocess.SubprocessError:
            pass
        finally:
            self.busy.discard(cid)


class Stack:
    """deploy/compose.yaml (+ compose.cpu.yaml, compose.test.yaml) under podman's Docker API."""

    def __init__(self, stack_dir: Path = STACK_DIR):
        self.dir = stack_dir
        self.dir.mkdir(parents=True, exist_ok=True)
        self.sock = self.dir / "podman.sock"
        self.env_file = DEPLOY / ".env"
        if not self.env_file.exists():  # as docs/DEPLOY.md says: deploy/gen-env.sh > deploy/.env
            out = subprocess.run(
                ["sh", str(DEPLOY / "gen-env.sh")], capture_output=True, text=True, check=True
            )
            self.env_file.write_text(out.stdout)
        self.secrets = env_file_values(self.env_file)
        self.port, self.monitor_port = free_port(), free_port()
        self.models = self.dir / "models"
        self.env = {
            **os.environ,
            "DOCKER_HOST": f"unix://{self.sock}",
            "TREEGRPO_MODELS": str(self.models),
            "TG_NATS_PORT": str(self.port),
            "TG_NATS_MONITOR_PORT": str(self.monitor_port),
        }
        self.engine: subprocess.Popen | None = None
        self.driver = HealthDriver()
        binary = compose_cmd(str(self.dir / "docker-config"))
        self.compose_cmd = [*binary, *[a for f in FILES for a in ("-f", str(f))]]
        self.compose_cmd += ["--env-file", str(self.env_file)]

    @property
    def operator_url(self) -> str:
        return f"nats://operator:{self.secrets['TG_OPERATOR_PASSWORD']}@127.0.0.1:{self.port}"

    def start_engine(self) -> None:
        """podman's Docker-API service on a private socket, and the healthcheck driver."""
        self.sock.unlink(missing_ok=True)
        log = open(self.dir / "podman-service.log", "ab")
        argv = ["podman", "system", "service", "--time=0", f"unix://{self.sock}"]
        self.engine = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + 30
        while not self.sock.exists():
            assert self.engine.poll() is None and time.monotonic() < deadline, "podman system service died"
            time.sleep(0.2)
        self.driver.start()

    def compose(self, *args: str, timeout: float = 600, check: bool = True) -> subprocess.CompletedProcess:
        res = subprocess.run(
            [*self.compose_cmd, *args],
            env=self.env,
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        if check and res.returncode != 0:
            raise AssertionError(
                f"docker compose {' '.join(args)} failed:\n{res.stdout[-3000:]}{res.stderr[-3000:]}"
            )
        return res

    def up(self, *services: str, wait_s: int = 600) -> float:
        """`up -d --wait` (of `services`, else of all): seconds until each container is running and
        its healthcheck healthy."""
        started = time.monotonic()
        argv = ["up", "-d", "--no-build", "--pull", "never", "--wait", "--wait-timeout", str(wait_s)]
        self.compose(*argv, *services, timeout=wait_s + 60)
        return time.monotonic() - started

    def down(self) -> None:
        self.compose("down", "--volumes", "--remove-orphans", "--timeout", "30", timeout=300, check=False)

    def close(self) -> None:
        self.driver.stopping.set()
        if self.engine is not None and self.engine.poll() is None:
            self.engine.terminate()
            try:
                self.engine.wait(30)
            except subprocess.TimeoutExpired:
                self.engine.kill()
                self.engine.wait(5)

    @staticmethod
    def container(service: str) -> str:
        return f"{PROJECT}-{service}-1"

    def inspect(self, service: str) -> dict:
        out = subprocess.run(
            ["podman", "inspect", self.container(service)], capture_output=True, text=True, check=True
        )
        return json.loads(out.stdout)[0]

    def health(self, service: str) -> str:
        state = self.inspect(service)["State"]
        return (state.get("Health") or state.get("Healthcheck") or {}).get("Status", "")

    def exec(self, service: str, *argv: str, user: str | None = None) -> subprocess.CompletedProcess:
        cmd = ["podman", "exec", *(["--user", user] if user else []), self.container(service), *argv]
        return subprocess.run(cmd, capture_output=True, text=True, timeout=120)

    def logs(self, service: str) -> str:
        return self.compose("logs", "--no-color", service, check=False).stdout

    @staticmethod
    def volume_path(volume: str) -> Path:
        out = subprocess.run(
            ["podman", "volume", "inspect", "--format", "{{.Mountpoint}}", f"{PROJECT}_{volume}"],
            capture_output=True,
            text=True,
            check=True,
        )
        return Path(out.stdout.strip())

    def wait_healthy(self, services: tuple[str, ...] = SERVICES, timeout: float = 300) -> float:
        started = time.monotonic()
        while any(self.health(s) != "healthy" for s in services):
            assert time.monotonic() - started < timeout, {s: self.health(s) for s in services}
            time.sleep(1)
        return time.monotonic() - started


def attached_run(stack: Stack, home: Path, *sets: str, config: str = "treegrpo/examples/run-small.toml"):
    """`treegrpo run CONFIG --attach` on this host against the stack's NATS (as the operator user):
    it starts no service, publishes run.started, follows the run, exports and reports."""
    from tests.e2e._harness import start_run

    home.mkdir(parents=True, exist_ok=True)
    return start_run(home, config, f'runner.nats_url="{stack.operator_url}"', *sets, flags=("--attach",))


REPLAY_TOKENS = 1024  # the longest spooky-mini corpus script is 985 tokens of the tiny model's tokenizer


def sampler_backend(stack: Stack, backend: str) -> None:
    """Recreate the sampler container on `hf` (the tiny model samples) or `replay` (compose.test.yaml)."""
    tokens = str(REPLAY_TOKENS if backend == "replay" else 64)
    now = (stack.env.get("TG_SAMPLER_BACKEND", "hf"), stack.env.get("TG_MAX_NEW_TOKENS", "64"))
    if now == (backend, tokens):
        return
    stack.env.update(TG_SAMPLER_BACKEND=backend, TG_MAX_NEW_TOKENS=tokens)
    stack.up("sampler", wait_s=300)
    stack.wait_healthy(("sampler",), timeout=120)


def node_outcomes(url: str, run_id: str) -> list:
    """Every node.executed fact of the run, from the stream (as the operator user)."""
    from treegrpo.bus import Bus

    async def read() -> list:
        bus = await Bus.connect(url, "test/reader", 10)
        try:
            return [e.node_executed async for _, e in bus.replay(run_id) if e.HasField("node_executed")]
        finally:
            await bus.close(2)

    return asyncio.run(read())
