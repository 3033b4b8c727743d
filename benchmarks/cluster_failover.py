"""The pause a run sees when a server of a three-server JetStream cluster fails.

    python benchmarks/cluster_failover.py [--trials 3] [--faults kill-leader,kill-follower,stop-leader]

Three nats-servers clustered on loopback as deploy/k8s/overlays/prod/cluster.conf configures them
(routes to all three, JetStream), the stream made with 3 replicas through `Bus.ensure`, a client
given all three URLs. A publish loop writes one event every 20 ms; the fault is injected; the pause
is the time from the fault to the first write accepted after it. The faulted server is brought
back (restarted, or SIGCONT) before the next trial. Prints one line per trial and the medians.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from treegrpo import events  # noqa: E402
from treegrpo.bus import STREAM, Bus  # noqa: E402
from treegrpo.embedded import find_binary, free_port  # noqa: E402
from treegrpo.v1 import events_pb2 as pb  # noqa: E402


class Server:
    def __init__(self, root: Path, name: str, port: int, cport: int, routes: list[int]):
        self.root, self.name, self.port, self.cport, self.routes = root / name, name, port, cport, routes
        self.proc: subprocess.Popen | None = None

    def start(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        routes = "\n".join(f'    "nats://127.0.0.1:{p}"' for p in self.routes)
        conf = self.root / "nats.conf"
        conf.write_text(
            f'server_name: {self.name}\nlisten: "127.0.0.1:{self.port}"\n'
            f'jetstream {{ store_dir: "{self.root / "js"}" }}\n'
            f'cluster {{\n  name: treegrpo\n  listen: "127.0.0.1:{self.cport}"\n  routes: [\n{routes}\n  ]\n'
            "  connect_retries: 120\n}\n"
        )
        log = open(self.root / "server.log", "ab")
        self.proc = subprocess.Popen(
            [find_binary(), "-c", str(conf)], stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
        log.close()

    def signal(self, sig: int) -> None:
        os.kill(self.proc.pid, sig)
        if sig == signal.SIGKILL:
            self.proc.wait(5)

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGCONT)
            self.proc.terminate()
            self.proc.wait(10)


async def leader(bus: Bus) -> str:
    return (await bus.js.stream_info(STREAM)).cluster.leader


async def trial(bus: Bus, servers: dict[str, Server], fault: str, n: int) -> float:
    name = await leader(bus)
    target = servers[name] if fault != "kill-follower" else next(s for k, s in servers.items() if k != name)
    accepted: list[float] = []
    stop = asyncio.Event()

    async def writes() -> None:
        i = 0
        while not stop.is_set():
            i += 1
            body = pb.NodeSampled(node_id=f"{fault}-{n}-{i}", task="t", round=1)
            try:
                await asyncio.wait_for(bus.publish(events.make_event("failover", "bench", body)), 2.0)
                accepted.append(time.monotonic())
            except Exception:  # refused or timed out: the pause
                pass
            await asyncio.sleep(0.02)

    task = asyncio.create_task(writes())
    await asyncio.sleep(1.0)
    at = time.monotonic()
    target.signal(signal.SIGSTOP if fault == "stop-leader" else signal.SIGKILL)
    while not [t for t in accepted if t > at + 0.001] and time.monotonic() - at < 60:
        await asyncio.sleep(0.01)
    pause = min((t for t in accepted if t > at), default=float("nan")) - at
    if fault == "stop-leader":
        await asyncio.sleep(max(0.0, 6.0 - (time.monotonic() - at)))  # past the election timeout
    stop.set()
    await task
    if fault == "stop-leader":
        target.signal(signal.SIGCONT)
    else:
        target.start()
    await asyncio.sleep(5.0)  # the server back and caught up before the next trial
    return pause


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--trials", type=int, default=3)
    ap.add_argument("--faults", default="kill-leader,kill-follower,stop-leader")
    args = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="tg-cluster-"))
    ports = [(free_port(), free_port()) for _ in range(3)]
    servers = {
        f"n{i}": Server(root, f"n{i}", p, c, [cp for _, cp in ports]) for i, (p, c) in enumerate(ports)
    }
    for s in servers.values():
        s.start()
    try:
        urls = ",".join(f"nats://127.0.0.1:{s.port}" for s in servers.values())
        bus = await Bus.connect(urls, "bench/failover", 30, replicas=3)
        for _ in range(60):  # the cluster elects its meta leader after the routes are up
            try:
                await bus.ensure()
                break
            except Exception:
                await asyncio.sleep(0.5)
        results: dict[str, list[float]] = {}
        for fault in args.faults.split(","):
            for n in range(args.trials):
                pause = await trial(bus, servers, fault, n)
                results.setdefault(fault, []).append(pause)
                print(f"{fault} trial {n}: writes accepted again after {pause:.2f} s", flush=True)
        for fault, pauses in results.items():
            print(f"{fault}: median {statistics.median(pauses):.2f} s over {len(pauses)} ({pauses})")
        await bus.close(2)
    finally:
        for s in servers.values():
            s.stop()


if __name__ == "__main__":
    asyncio.run(main())
