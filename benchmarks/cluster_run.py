"""A whole run on a three-server JetStream cluster, a server killed under it (issue 32, item 1).

    python benchmarks/cluster_run.py [--fault kill-leader|kill-follower|stop-leader] [--attach]
        [--json out.json]

Three nats-servers clustered on loopback as deploy/k8s/overlays/prod configures them (routes,
JetStream; benchmarks/cluster_failover.py's `Server`), `treegrpo run treegrpo/examples/run-small.toml`
with `runner.nats_url` the list of all three URLs and `runner.stream_replicas = 3` (the runner starts
the four services on the same list); or, `--attach`, the four services started apart first
(`treegrpo serve`, as deployed: the same list, `nats.stream_replicas = 3`) and `treegrpo run
--attach` on the cluster (the services must outlive the fault and drain on SIGTERM). Once a few
nodes are graded the fault is injected: SIGKILL of the stream's leader (restarted `--down-s`
later), SIGKILL of a follower (restarted likewise), or SIGSTOP of the leader for `--down-s` (past
the election timeout, then SIGCONT). Measured: the pause the run sees, from the fault to the first
new message the run's services wrote to the stream. Then: the run completes, every node's facts
were written once (one message per subject on the stream), every group trained at most once, the
export has every node.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.cluster_failover import Server, leader  # noqa: E402
from tests.e2e._harness import (  # noqa: E402
    ROOT,
    env_for,
    export_records,
    prepare_home,
    read_log,
    run_argv,
    serve_four,
    stop,
)
from treegrpo import events  # noqa: E402
from treegrpo.bus import STREAM, Bus  # noqa: E402
from treegrpo.embedded import free_port  # noqa: E402
from treegrpo.events import Kind  # noqa: E402

RUN = "cluster_run_1"
NODES, GROUPS, STEPS = 1 * 2 * 3 * 2, 1 * 2 * 3, 2  # run-small: 1 task, 2 rounds, 3 expansions of 2


async def cluster_ready(urls: str) -> Bus:
    bus = await Bus.connect(urls, "bench/cluster-run", 30, replicas=3)
    for _ in range(120):  # the meta leader is elected once the routes are up
        try:
            await bus.ensure()
            return bus
        except Exception:
            await asyncio.sleep(0.5)
    raise RuntimeError("the cluster never took the stream")


async def last_seq(bus: Bus) -> int:
    return (await bus.js.stream_info(STREAM)).state.last_seq


async def inject(bus: Bus, servers: dict[str, Server], fault: str, down_s: float, run) -> dict:
    """Wait until 4 nodes are graded, inject the fault, time the pause, bring the server back."""
    subject = f"{events.SUBJECT_ROOT}.{RUN}.node.graded.>"
    while run.poll() is None:
        info = await bus.js.stream_info(STREAM, subjects_filter=subject)
        if len(info.state.subjects or {}) >= 4:
            break
        await asyncio.sleep(0.5)
    if run.poll() is not None:
        return {"fault": "none: the run ended before any node was graded"}
    name = await leader(bus)
    target = servers[name] if fault != "kill-follower" else next(s for k, s in servers.items() if k != name)
    before = await last_seq(bus)
    at = time.monotonic()
    target.signal(signal.SIGSTOP if fault == "stop-leader" else signal.SIGKILL)
    pause, back = float("nan"), False
    while time.monotonic() - at < 300 and run.poll() is None:
        if not back and time.monotonic() - at >= down_s:
            target.signal(signal.SIGCONT) if fault == "stop-leader" else target.start()
            back = True
        try:
            seq = await asyncio.wait_for(last_seq(bus), 2.0)
        except Exception:  # no stream leader to answer yet
            seq = before
        if seq > before and pause != pause:
            pause = time.monotonic() - at
        if back and pause == pause:
            break
        await asyncio.sleep(0.1)
    if not back:
        target.signal(signal.SIGCONT) if fault == "stop-leader" else target.start()
    return {
        "fault": fault,
        "server": target.name,
        "was_leader": name == target.name,
        "pause_s": round(pause, 2),
    }


async def written_once(bus: Bus) -> dict:
    """Messages per subject of the run's node and group facts: one each when nothing was doubled."""
    out = {}
    for kind in (Kind.NODE_SAMPLED, Kind.NODE_EXECUTED, Kind.NODE_GRADED, Kind.GROUP_SCORED):
        for _ in range(30):  # a restarted server may still be catching up: its requests time out
            try:
                info = await bus.js.stream_info(STREAM, subjects_filter=events.subject_filter(kind, RUN))
                break
            except Exception:
                await asyncio.sleep(1.0)
        counts = Counter((info.state.subjects or {}).values())
        out[str(kind)] = {
            "subjects": sum(counts.values()),
            "max_messages_per_subject": max(counts, default=0),
        }
    return out


def start_run(home: Path, model: Path, urls: str, attach: bool, log: Path) -> subprocess.Popen:
    """`treegrpo run` on the cluster: starting the four services itself, or `--attach`ed to
    services already running (then the run file's service sections are theirs, not the run's)."""
    sets = [f'runner.nats_url="{urls}"', "runner.stream_replicas=3", f'run.run_id="{RUN}"']
    if not attach:
        sets += [f'sampler.model="{model}"', f'learner.model="{model}"']
    argv = run_argv("treegrpo/examples/run-small.toml", *(["--attach"] if attach else []), sets=sets)
    with open(log, "wb") as out:
        return subprocess.Popen(argv, env=env_for(home), cwd=ROOT, stdout=out, stderr=subprocess.STDOUT)


async def measure(root: Path, fault_name: str, down_s: float, attach: bool = False) -> dict:
    """One run under one fault, in `root`: what `main` prints (tests/e2e/test_cluster_run.py too).
    `attach`: the four services started apart first (`treegrpo serve`, all three URLs, replicas 3),
    then `treegrpo run --attach`; they must outlive the fault and drain on SIGTERM."""
    home = root / "home"
    model = prepare_home(home)
    ports = [(free_port(), free_port()) for _ in range(3)]
    servers = {
        f"n{i}": Server(root, f"n{i}", p, c, [cp for _, cp in ports]) for i, (p, c) in enumerate(ports)
    }
    for s in servers.values():
        s.start()
    services: list[subprocess.Popen] = []
    codes: list[int] = []
    try:
        urls = ",".join(f"nats://127.0.0.1:{s.port}" for s in servers.values())
        bus = await cluster_ready(urls)
        if attach:
            services = serve_four(  # with what run-small.toml gives the services the runner starts
                home, urls, model, "nats.stream_replicas=3", sampler=("sampling.max_new_tokens=64",),
                executor=("max_concurrency=2", "timeout_s=60"),
            )  # fmt: skip
        t0 = time.monotonic()
        run = start_run(home, model, urls, attach, root / "run.log")
        fault = await inject(bus, servers, fault_name, down_s, run)
        while run.poll() is None:
            await asyncio.sleep(0.5)
        run_s = time.monotonic() - t0
        alive = all(p.poll() is None for p in services)
        once = await written_once(bus)
        await bus.close(2)
        log = await asyncio.to_thread(read_log, home, RUN, urls)
        exported = len(export_records(home / "runs" / RUN / "export"))
    finally:
        codes = await asyncio.to_thread(stop, services)
        for s in servers.values():
            s.stop()
    exact = (
        run.returncode == 0
        and alive
        and all(c == 0 for c in codes)
        and log.counts[Kind.NODE_SAMPLED] == len(set(log.node_ids)) == NODES
        and log.counts[Kind.NODE_EXECUTED] == log.counts[Kind.NODE_GRADED] == NODES
        and log.counts[Kind.GROUP_SCORED] == len(set(log.groups_scored)) == GROUPS
        and len(log.steps) == STEPS
        and len(set(log.groups_trained)) == len(log.groups_trained)
        and all(v["max_messages_per_subject"] == 1 for v in once.values())
        and exported == NODES
    )
    result = {
        "date": time.strftime("%Y-%m-%d"),
        "way": "attach" if attach else "runner",
        "loadavg": os.getloadavg(),
        **fault,
        "down_s": down_s,
        "run_s": round(run_s, 1),
        "runner_exit": run.returncode,
        "steps": len(log.steps),
        "written_once": once,
        "exported": exported,
        "services_alive": alive,
        "service_exit_codes": codes,
        "exact": exact,
    }
    if not exact:
        result["run_log_tail"] = (root / "run.log").read_text(errors="replace")[-3000:]
        for name in ("sampler", "executor", "grader", "learner") if attach else ():
            result[f"{name}_log_tail"] = (home / f"{name}.log").read_text(errors="replace")[-1500:]
    return result


async def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--fault", default="kill-leader", choices=["kill-leader", "kill-follower", "stop-leader"])
    ap.add_argument("--down-s", type=float, default=7.0)
    ap.add_argument("--attach", action="store_true", help="services started apart, then `run --attach`")
    ap.add_argument("--json", type=Path)
    ap.add_argument("--keep", action="store_true", help="keep the servers' stores, the home and the logs")
    args = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="tg-cluster-run-"))
    result = await measure(root, args.fault, args.down_s, args.attach)
    if not args.keep:
        shutil.rmtree(root, ignore_errors=True)
    text = json.dumps(result, indent=1)
    print(text)
    if args.json:
        args.json.write_text(text + "\n")
    return 0 if result["exact"] else 1


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
