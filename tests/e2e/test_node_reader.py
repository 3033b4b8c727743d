"""A run's stream read by a client that is not Python: `clients/node/read_stream.mjs` (Node.js,
`nats` + `protobufjs`) with the .proto files alone. Every event of a real run decodes, names its
body in its subject, carries a W3C traceparent, and the kinds and counts match the Python reader's
(`Bus.replay`); the run's trace files parse as OTLP/JSON against the opentelemetry-proto
definitions (`tests/unit/test_telemetry_otlp.py` tests the writer itself)."""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.e2e._harness import ROOT, load_spans, prepare_home, read_log, run_ids, start_run
from treegrpo.bus import Bus
from treegrpo.embedded import EmbeddedNats
from treegrpo.events import Kind, make_event
from treegrpo.v1 import events_pb2 as pb

CLIENT = ROOT / "clients" / "node"
NODE, NPM = shutil.which("node"), shutil.which("npm")

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not (NODE and NPM),
        reason="the Node.js stream reader needs `node` and `npm` on PATH (neither is a Python dependency)",
    ),
]

# every kind a plain trained run publishes: not the ones of faults (dead.lettered goes to its own
# stream), resumes, restores, group.respent (only with run.tree.respend on), nor node.retried
# (only on `--resume --retry-masked`)
RUN_KINDS = {k.value for k in Kind} - {
    Kind.DEAD_LETTERED,
    Kind.RUN_RESUMED,
    Kind.LEARNER_RESTORED,
    Kind.GROUP_RESPENT,
    Kind.NODE_RETRIED,
}


def installed_client() -> Path:
    """The client with its locked dependencies (`npm ci`), in a cache keyed by the lock file: a
    fresh clone installs once, later runs reuse it. The script is copied beside node_modules, where
    Node resolves its imports."""
    lock = (CLIENT / "package-lock.json").read_bytes()
    cache = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "treegrpo-node"
    home = cache / hashlib.sha256(lock).hexdigest()[:16]
    if not (home / "node_modules").is_dir():
        staging = cache / f".staging-{os.getpid()}"
        shutil.rmtree(staging, ignore_errors=True)
        staging.mkdir(parents=True)
        for name in ("package.json", "package-lock.json"):
            shutil.copy(CLIENT / name, staging / name)
        npm = subprocess.run(
            [NPM, "ci", "--no-audit", "--no-fund"], cwd=staging, capture_output=True, text=True, timeout=300
        )
        assert npm.returncode == 0, f"npm ci failed:\n{npm.stdout[-2000:]}\n{npm.stderr[-2000:]}"
        try:
            staging.rename(home)
        except OSError:  # another session installed the same lock meanwhile
            shutil.rmtree(staging, ignore_errors=True)
    shutil.copy(CLIENT / "read_stream.mjs", home / "read_stream.mjs")
    return home / "read_stream.mjs"


def read_with_node(script: Path, url: str, run_id: str, *args: str) -> tuple[int, dict]:
    proto_dir = str(ROOT / "proto" / "treegrpo" / "v1")
    proc = subprocess.run(
        [NODE, str(script), "--run", run_id, "--server", url, "--proto-dir", proto_dir, *args],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.stdout.strip(), f"the Node reader printed no summary (rc {proc.returncode}):\n{proc.stderr}"
    return proc.returncode, json.loads(proc.stdout)


@pytest.mark.timeout(900)
def test_node_client_decodes_every_event_of_a_real_run_from_the_proto_files_alone(tmp_path):
    script = installed_client()
    home = tmp_path / "home"
    model = prepare_home(home)
    proc = start_run(
        home, "treegrpo/examples/run-small.toml", f'sampler.model="{model}"', f'learner.model="{model}"'
    )
    assert proc.wait(540) == 0, (home / "run.log").read_text()[-4000:]
    (run_id,) = run_ids(home)
    traces = home / "runs" / run_id / "traces"

    server = EmbeddedNats(home / "nats" / "data").start()  # the run's own store, its server stopped
    try:
        python_side = read_log(home, run_id, url=server.url)
        rc, summary = read_with_node(script, server.url, run_id, "--traces", str(traces))
    finally:
        server.stop()

    assert summary["failures"] == [] and rc == 0, json.dumps(summary, indent=2)
    assert summary["kinds"] == {str(k): n for k, n in python_side.counts.items()}
    assert summary["events"] == summary["traced"] == sum(python_side.counts.values())
    assert set(summary["kinds"]) == RUN_KINDS, f"the run published {sorted(summary['kinds'])}"

    # the trace files: OTLP/JSON as a JavaScript reader needs it, and as opentelemetry-proto parses it
    spans = load_spans(home / "runs" / run_id)
    assert set(summary["traces"]["services"]) >= {"sampler", "executor", "grader", "learner"}
    assert summary["traces"]["spans"] == len(spans) > 0


def test_node_client_reports_garbage_a_missing_traceparent_and_a_flat_trace_file(nats_server, tmp_path):
    """The reader can fail: garbage under a run's subject, published without trace context, and
    a trace file in the flat format written before OTLP/JSON (nanoseconds as JSON numbers)."""
    script = installed_client()

    async def publish() -> None:
        bus = await Bus.connect(nats_server.url, "test/pub", 5)
        await bus.ensure()
        await bus.publish(make_event("r1", "runner/test", pb.RunStarted(rounds=1)))
        await bus.publish_raw("tg.r1.node.graded.0123456789ab", b"\xff not an event")
        await bus.close(2)

    asyncio.run(publish())
    traces = tmp_path / "traces"
    traces.mkdir()
    flat = {"name": "sampler r1 node.sampled", "trace_id": "ab" * 16, "span_id": "cd" * 8}
    (traces / "sampler.jsonl").write_text(json.dumps({**flat, "start_ns": 1796105724539196965}) + "\n")
    rc, summary = read_with_node(script, nats_server.url, "r1", "--traces", str(traces))
    assert rc == 1 and summary["events"] == 2 and summary["traced"] == 1
    errors = [f["error"] for f in summary["failures"]]
    assert any("does not decode" in e for e in errors) and any("traceparent" in e for e in errors), errors
    assert {"trace_file": "sampler.jsonl", "line": 1, "error": "no resourceSpans"} in summary["failures"]
