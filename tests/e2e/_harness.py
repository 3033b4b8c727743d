"""Helpers for end-to-end runs: a private $TREEGRPO_HOME with a tiny model and the built-in tasks,
`treegrpo run` as a real process tree, and reading the run's log back afterwards."""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from nats.js import api

from treegrpo import events
from treegrpo.bus import STREAM, Bus
from treegrpo.embedded import EmbeddedNats
from treegrpo.events import Kind
from treegrpo.telemetry import read_spans

ROOT = Path(__file__).resolve().parents[2]
# the seed issue 12's learning bar was measured at (tests/e2e/test_learning_control.py)
DEMO_SEED = 0


def prepare_home(home: Path, size: str = "tiny") -> Path:
    """Build the tiny model (tokenizer trained on little text: seconds) and the built-in tasks."""
    from treegrpo.models import build_model
    from treegrpo.tasks import ensure_builtin_tasks

    model = home / "models" / size
    if not (model / "config.json").exists():
        build_model(model, size=size, vocab_size=2048, tokenizer_bytes=1 << 20)
    ensure_builtin_tasks(home)
    return model


def env_for(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TREEGRPO_")}
    return {**env, "TREEGRPO_HOME": str(home), "PYTHONUNBUFFERED": "1"}


def run_argv(config: str, *args: str, sets: tuple[str, ...] | list[str] = ()) -> list[str]:
    """`treegrpo run CONFIG ARGS... --set S...` as the tests start it (CONFIG relative to the checkout)."""
    argv = [sys.executable, "-m", "treegrpo.cli", "run", str(ROOT / config), *args]
    for s in sets:
        argv += ["--set", s]
    return argv


def run_paired(home: Path, config: str, *overrides: str, timeout: float = 600) -> str:
    """`treegrpo run CONFIG --control --set ...` to completion; its output."""
    argv = run_argv(config, "--control", sets=overrides)
    done = subprocess.run(argv, env=env_for(home), cwd=ROOT, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, (done.stdout + done.stderr)[-4000:]
    return done.stdout


def start_run(
    home: Path, config: str, *overrides: str, log_path: Path | None = None, flags: tuple[str, ...] = ()
) -> subprocess.Popen:
    """`treegrpo run CONFIG FLAGS... --set OVERRIDE...` in the background, its output in home/run.log."""
    argv = run_argv(config, *flags, sets=overrides)
    out = open(log_path or home / "run.log", "ab")
    return subprocess.Popen(
        argv,
        env=env_for(home),
        stdout=out,
        stderr=subprocess.STDOUT,
        cwd=ROOT,
        start_new_session=True,
        preexec_fn=_ctrl_c_as_at_a_terminal,
    )


def _ctrl_c_as_at_a_terminal() -> None:
    """A shell starts background jobs with SIGINT ignored, and the ignore is inherited: under a CI
    launched that way a run would never see the tests' Ctrl-C. A run in a terminal has the default."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def serve(home: Path, name: str, url: str, *sets: str) -> subprocess.Popen:
    """`treegrpo serve NAME` as a process of its own on `url`, as compose or Kubernetes would run it."""
    argv = [sys.executable, "-m", "treegrpo.cli", "serve", name, "--set", f'nats.url="{url}"']
    for s in sets:
        argv += ["--set", s]
    log = open(home / f"{name}.log", "ab")
    return subprocess.Popen(
        argv, env=env_for(home), stdout=log, stderr=subprocess.STDOUT, cwd=ROOT, start_new_session=True
    )


def serve_four(
    home: Path,
    url: str,
    model: Path,
    *common: str,
    sampler: tuple[str, ...] = (),
    executor: tuple[str, ...] = ("max_concurrency=2",),
) -> list[subprocess.Popen]:
    """The four services apart, as compose runs them (no run id, no push endpoint: the sampler
    pulls each published version), on `url` (one URL or a comma-separated list of a cluster's).
    `common` goes to all four (e.g. `nats.stream_replicas=3`); `sampler` and `executor` to the one
    (the sampler and the learner load `model`)."""
    return [
        serve(home, "sampler", url, f'model="{model}"', "grpc.port=0", *sampler, *common),
        serve(home, "executor", url, *executor, *common),
        serve(home, "grader", url, *common),
        serve(home, "learner", url, f'model="{model}"', *common),
    ]


def wait_ready(home: Path, procs: list[subprocess.Popen], timeout: float = 300) -> None:
    """Until each service's heartbeat under home/health says running and connected (what
    compose's healthchecks wait for); RuntimeError if one exits or the time runs out."""
    from treegrpo.health import check_files

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        beats = sorted((home / "health").glob("*.json"))
        if len(beats) >= len(procs) and not check_files(beats, 60, ready=True):
            return
        if any(p.poll() is not None for p in procs):
            raise RuntimeError(f"a service exited before it was ready: see {home}/*.log")
        time.sleep(1)
    raise RuntimeError(f"the services were not ready in {timeout:.0f} s: see {home}/*.log")


def stop(procs: list[subprocess.Popen]) -> list[int]:
    """SIGTERM each, then their exit codes (a process still there after 30 s is killed)."""
    for p in procs:
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
    codes = []
    for p in procs:
        try:
            codes.append(p.wait(30))
        except subprocess.TimeoutExpired:
            p.kill()
            codes.append(p.wait(5))
    return codes


def pid_running(pid: int) -> bool:
    """A live process (not a zombie waiting to be reaped), from /proc."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state not in ("Z", "X")


def home_processes(home: Path) -> dict[int, str]:
    """Every live process whose command line names something under `home` (the keeper, nats-server,
    the services), by PID, from /proc: what a run leaves behind when it should leave nothing."""
    out = {}
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            argv = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if str(home) in argv and pid_running(int(proc.name)):
            out[int(proc.name)] = argv.strip()
    return out


def run_ids(home: Path) -> list[str]:
    runs = home / "runs"
    return sorted(p.name for p in runs.iterdir()) if runs.exists() else []


@dataclass
class RunLog:
    counts: Counter = field(default_factory=Counter)  # event kind -> count (as stored)
    node_ids: list[str] = field(default_factory=list)  # node.sampled, in stream order
    groups_scored: list[str] = field(default_factory=list)
    groups_trained: list[str] = field(default_factory=list)
    graded_status: Counter = field(default_factory=Counter)
    steps: list = field(default_factory=list)
    traced: Counter = field(default_factory=Counter)  # event kind -> count with a valid traceparent
    parents: dict = field(default_factory=dict)  # event kind -> the span ids its traceparents name


TRACEPARENT = re.compile(r"^00-(?!0{32})[0-9a-f]{32}-(?!0{16})[0-9a-f]{16}-[0-9a-f]{2}$")


def read_log(home: Path, run_id: str, url: str = "") -> RunLog:
    """Fold the run's log: from the server at `url`, or from a nats-server started on the run's
    store (after the run stopped its own)."""
    if url:
        return asyncio.run(_fold(url, run_id))
    server = EmbeddedNats(home / "nats" / "data").start()
    try:
        return asyncio.run(_fold(server.url, run_id))
    finally:
        server.stop()


async def _fold(url: str, run_id: str) -> RunLog:
    out = RunLog()
    bus = await Bus.connect(url, "test/reader", 10)
    async for _, e in bus.replay(run_id):
        kind = events.kind_of(e)
        who = e.envelope.producer.split("/")[0]  # "sampler/<host>-<pid>" -> "sampler"
        assert who in events.TOPOLOGY[kind].producers or who == events.IMPORTED_PRODUCER, (
            f"{who} published {kind}: not in the topology table"
        )
        out.counts[kind] += 1
        b = events.body_of(e)
        if kind == Kind.NODE_SAMPLED:
            out.node_ids.append(b.node_id)
        elif kind == Kind.GROUP_SCORED:
            out.groups_scored.append(b.sibling_group)
        elif kind == Kind.LEARNER_STEPPED:
            out.groups_trained += list(b.sibling_groups)
            out.steps.append(b)
        elif kind == Kind.NODE_GRADED:
            out.graded_status[b.status] += 1
    await _count_traced(bus, run_id, out.traced, out.parents)
    await bus.close(2)
    return out


async def _count_traced(bus: Bus, run_id: str, traced: Counter, parents: dict) -> None:
    """Per kind, the run's messages whose headers carry a well-formed W3C traceparent, read raw
    from the stream (replay returns bodies, not headers)."""
    cfg = api.ConsumerConfig(ack_policy=api.AckPolicy.NONE, deliver_policy=api.DeliverPolicy.ALL)
    sub = await bus.js.pull_subscribe(
        f"{events.SUBJECT_ROOT}.{run_id}.>", durable=None, stream=STREAM, config=cfg
    )
    remaining = (await sub.consumer_info()).num_pending
    while remaining > 0:
        for m in await sub.fetch(min(512, remaining), timeout=5):
            remaining = m.metadata.num_pending
            parent = (m.headers or {}).get("traceparent", "")
            if TRACEPARENT.match(parent):
                kind = events.kind_of(events.decode(m.data))
                traced[kind] += 1
                parents.setdefault(kind, set()).add(parent.split("-")[2])
    await sub.unsubscribe()


def export_records(export_dir: Path) -> list[dict]:
    rows = []
    for path in sorted(export_dir.rglob("*.jsonl")):
        if path.name == "timing.jsonl":
            continue
        rows += [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return rows


def load_spans(run_dir: Path) -> dict[str, dict]:
    """Every span of the run's OTLP/JSON trace files, by span id (each line parsed against the
    opentelemetry-proto definitions: a file a collector could not read fails here)."""
    return {s["span_id"]: s for path in (run_dir / "traces").glob("*.jsonl") for s in read_spans(path)}


def journey(spans: dict[str, dict], leaf: dict) -> list[dict]:
    """The chain of spans from `leaf` up to its root, following parent ids across services."""
    chain = [leaf]
    while chain[-1]["parent_id"] and chain[-1]["parent_id"] in spans:
        chain.append(spans[chain[-1]["parent_id"]])
    return chain
