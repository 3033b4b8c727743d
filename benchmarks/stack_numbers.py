"""The compose stack's numbers (docs/DEPLOY.md, docs/PERFORMANCE.md): image sizes, build times,
start to all-healthy, and one run's wall time in the containers against the same run on the host.

    python benchmarks/stack_numbers.py sizes
    python benchmarks/stack_numbers.py build [--cold] [--repeats 3]  # then: no change / a core file touched
    python benchmarks/stack_numbers.py start [--repeats 3]           # compose down -v, then up --wait
    python benchmarks/stack_numbers.py runs [--repeats 3]
    python benchmarks/stack_numbers.py faults [--repeats 3]           # the kill trials, --repeats runs

`runs`: run-small (1 task x 2 rounds x E3 x G2 = 12 nodes, training on) with the sampler on the
replay backend (the seed corpus's spooky-mini scripts, teacher-forced through the tiny model), so
nodes run real scripts; the same settings three ways, interleaved, medians of --repeats:
  container  `treegrpo run --attach` against the compose stack (services already up)
  host-attach the four services as `treegrpo serve` processes on the host with a private nats-server,
             then the same `treegrpo run --attach` (like for like: services already up)
  host-run   plain `treegrpo run` on the host: the embedded default, which starts NATS and the four
             services itself (their start-up included)
Needs root, podman and the images (`make stack-test` does both). Results: benchmarks/results/.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from datetime import date
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from scripts.stack_images import layers, podman_out  # noqa: E402
from tests.e2e._harness import env_for, run_ids, serve, start_run, stop  # noqa: E402
from tests.stack._stack import REPLAY_TOKENS, STACK_DIR, Stack, attached_run, sampler_backend  # noqa: E402
from tests.stack.conftest import tiny_model  # noqa: E402
from treegrpo.embedded import EmbeddedNats, free_port  # noqa: E402

CORPUS = ROOT / "services" / "learner" / "treegrpo_learner" / "sft" / "corpus" / "spooky-mini"
RESULTS = ROOT / "benchmarks" / "results"
RUN = "treegrpo/examples/run-small.toml"


def sizes() -> dict:
    out = {}
    for name in ("grader", "executor", "sampler", "learner"):
        ref = f"localhost/treegrpo/{name}:0.1.0"
        out[name] = {
            "bytes": int(podman_out("image", "inspect", "--format", "{{.Size}}", ref)),
            "layers": [(created[:60], size) for created, size in layers(ref) if size],
        }
    return out


def build(cold: bool, repeats: int) -> dict:
    """Wall time of scripts/stack_images.py: --cold drops every layer first (the base image stays:
    debootstrap is timed apart, in scripts/stack_images.py's `base_s`)."""
    script = [sys.executable, str(ROOT / "scripts" / "stack_images.py")]
    out = {}

    def timed(*extra: str) -> float:
        t = time.monotonic()
        subprocess.run([*script, *extra], check=True, capture_output=True)
        return time.monotonic() - t

    if cold:  # every layer gone but the base's (pip's downloads take seconds here: not cached)
        names = [f"localhost/treegrpo/{n}:0.1.0" for n in ("grader", "executor", "sampler", "learner")]
        subprocess.run(["podman", "rmi", "-f", *names, "localhost/treegrpo/nats:2.15.1"], capture_output=True)
        for _ in range(5):  # the build stages' untagged images, children first
            subprocess.run(["podman", "image", "prune", "-f"], capture_output=True)
        out["cold_s"] = timed()
    out["no_change_s"] = [timed() for _ in range(repeats)]
    touched = ROOT / "treegrpo" / "__init__.py"
    original = touched.read_text()
    samples = []
    for i in range(repeats):  # a core source change: every image's core layer and all above it
        touched.write_text(original + f"# rebuild {i} at {time.time()}\n")  # new content each time
        try:
            samples.append(timed())
        finally:
            touched.write_text(original)
    out["core_change_s"] = samples
    out["after_revert_s"] = timed()
    return out


def start(repeats: int) -> dict:
    stack = Stack()
    tiny_model(stack.models / "base")
    stack.start_engine()
    try:
        samples = []
        for _ in range(repeats):
            stack.down()
            samples.append(stack.up())
        return {"up_to_healthy_s": samples}
    finally:
        stack.down()
        stack.close()


def replay_settings(model: Path) -> list[str]:
    """The sampler on the replay backend (the corpus's scripts through the tiny model)."""
    return [
        f'model="{model}"',
        'backend="replay"',
        f'replay.source_dir="{CORPUS}"',
        f"sampling.max_new_tokens={REPLAY_TOKENS}",
    ]


def replay_sets(model: Path) -> list[str]:
    """The same for `treegrpo run`, which starts the services itself."""
    return [f"sampler.{s}" for s in replay_settings(model)] + [f'learner.model="{model}"']


def timed_run(proc: subprocess.Popen, home: Path) -> float:
    t = time.monotonic()
    assert proc.wait(900) == 0, (home / "run.log").read_text()[-3000:]
    return time.monotonic() - t


def host_services(home: Path, model: Path) -> tuple[list[subprocess.Popen], EmbeddedNats]:
    """The four services as `treegrpo serve` processes on a private nats-server, each ready."""
    server = EmbeddedNats(home / "nats").start()
    port = free_port()
    grpc = ('grpc.host="127.0.0.1"', f"grpc.port={port}")
    procs = [
        serve(home, "sampler", server.url, *replay_settings(model), *grpc),
        serve(home, "executor", server.url, "max_concurrency=2", "timeout_s=60"),
        serve(home, "grader", server.url),
        serve(
            home, "learner", server.url, f'model="{model}"', f'publish.sampler_endpoints=["127.0.0.1:{port}"]'
        ),
    ]
    health = [sys.executable, "-m", "treegrpo.cli", "health", "--heartbeat", "--ready", "--timeout", "5"]
    env = {**env_for(home), "TREEGRPO_NATS_URL": server.url}
    for _ in range(300):  # every service ready, as compose's healthchecks require
        if subprocess.run(health, env=env, capture_output=True).returncode == 0:
            if len(list((home / "health").glob("*.json"))) == 4:
                return procs, server
        time.sleep(1)
    stop(procs)
    server.stop()
    raise RuntimeError(f"the host services were not ready in 300 s: see {home}/*.log")


def host_attach_run(home: Path, model: Path) -> float:
    """The four services as host processes with a private nats-server, then `treegrpo run --attach`."""
    home.mkdir(parents=True, exist_ok=True)
    procs, server = host_services(home, model)
    try:
        sets = (f'runner.nats_url="{server.url}"', "runner.timeout_s=800")
        return timed_run(start_run(home, RUN, *sets, flags=("--attach",)), home)
    finally:
        stop(procs)
        server.stop()


def one_round(stack: Stack, model: Path, i: int, out: dict[str, list[float]]) -> None:
    """The three ways once each, interleaved so that the machine's load affects them alike."""
    if i:  # a sampler serves one training run's adapters: a new run needs a fresh sampler
        stack.compose("restart", "sampler", timeout=300)  # (docs/DEPLOY.md, "Several runs")
        stack.wait_healthy(("sampler",), timeout=300)
    home = STACK_DIR / "bench" / f"c{i}-{time.time():.0f}"
    out["container"].append(timed_run(attached_run(stack, home, "runner.timeout_s=800"), home))
    out["host-attach"].append(host_attach_run(STACK_DIR / "bench" / f"a{i}-{time.time():.0f}", model))
    home = STACK_DIR / "bench" / f"h{i}-{time.time():.0f}"
    home.mkdir(parents=True)
    out["host-run"].append(timed_run(start_run(home, RUN, *replay_sets(model), "runner.timeout_s=800"), home))
    assert len(run_ids(home)) == 1


def runs(repeats: int) -> dict:
    stack = Stack()
    model = tiny_model(stack.models / "base")
    stack.start_engine()
    out: dict[str, list[float]] = {"container": [], "host-attach": [], "host-run": []}
    try:
        stack.down()
        stack.up()
        sampler_backend(stack, "replay")
        for i in range(repeats):
            one_round(stack, model, i, out)
            print({k: [round(v, 1) for v in vs] for k, vs in out.items()}, flush=True)
    finally:
        stack.down()
        stack.close()
    medians = {k: statistics.median(v) for k, v in out.items()}
    return {
        "samples_s": out,
        "median_s": medians,
        "container_over_host_attach": medians["container"] / medians["host-attach"],
        "container_over_host_run": medians["container"] / medians["host-run"],
    }


def faults(repeats: int) -> dict:
    """tests/stack/test_stack_c_faults.py --repeats times (each: SIGKILL learner, SIGKILL executor,
    restart nats, mid-run): what each run recorded, and the totals."""
    numbers = STACK_DIR / "numbers.json"
    test = [sys.executable, "-m", "pytest", "tests/stack/test_stack_c_faults.py", "-m", "stack", "-q"]
    out = []
    for _ in range(repeats):
        numbers.unlink(missing_ok=True)
        res = subprocess.run(test, cwd=ROOT, capture_output=True, text=True)
        trial = json.loads(numbers.read_text())["fault_trials"] if numbers.exists() else {}
        out.append({"passed": res.returncode == 0, **trial})
        print(out[-1], flush=True)
    kills = sum(len(t.get("trials", [])) for t in out if t["passed"])
    return {"runs": out, "runs_passed": sum(t["passed"] for t in out), "faults_survived": kills}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("what", choices=("sizes", "build", "start", "runs", "faults"))
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--cold", action="store_true")
    opts = parser.parse_args()
    load0 = os.getloadavg()
    result = {
        "sizes": sizes,
        "build": lambda: build(opts.cold, opts.repeats),
        "start": lambda: start(opts.repeats),
        "runs": lambda: runs(opts.repeats),
        "faults": lambda: faults(opts.repeats),
    }[opts.what]()
    result = {
        "what": opts.what,
        "date": str(date.today()),
        "machine": f"{os.cpu_count()} cores",
        "loadavg_before": load0,
        "loadavg_after": os.getloadavg(),
        **result,
    }
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / f"stack_{opts.what}_{date.today()}.json"
    path.write_text(json.dumps(result, indent=1))
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
