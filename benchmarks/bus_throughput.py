"""Bus throughput and latency, end to end through a durable consumer, on a private nats-server.

1. Throughput: N 1 KiB events published (pipelined) and consumed by `treegrpo.bus.Consumer`
   (decode, dispatch, ack). Baseline in the same run: raw nats.py publish_async + pull fetch + ack
   of the same payloads, no decoding (what the bus layer costs on top of the client).
2. Latency: events published at a fixed rate (default 1,000/s); publish->handler latency p50/p99.

    python benchmarks/bus_throughput.py [--events 50000] [--repeats 3] [--json out.json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import platform
import statistics
import tempfile
import time

from nats.js import api

from treegrpo import events
from treegrpo.bus import STREAM, Bus, Consumer, ConsumerOptions
from treegrpo.embedded import EmbeddedNats
from treegrpo.v1 import events_pb2 as pb

PAYLOAD = "x" * 900  # with the envelope: ~1 KiB on the wire


def make(run: str, i: int) -> pb.Event:
    return events.make_event(run, "bench", pb.NodeSampled(node_id=f"n{i:08d}", task="bench", code=PAYLOAD))


async def publish_all(bus: Bus, run: str, n: int, chunk: int = 2000) -> None:
    for start in range(0, n, chunk):
        await bus.publish_many(make(run, i) for i in range(start, min(n, start + chunk)))


async def ours(bus: Bus, run: str, n: int) -> float:
    await publish_all(bus, run, n)
    done = asyncio.Event()
    count = 0

    async def on(event, delivery):
        nonlocal count
        count += 1
        if count >= n:
            done.set()

    consumer = Consumer(
        bus,
        f"bench-{run}",
        [f"tg.{run}.node.sampled.>"],
        on,
        ConsumerOptions(max_inflight=512, fetch_timeout_s=0.5),
    )
    t0 = time.perf_counter()
    task = asyncio.create_task(consumer.run(done))
    await done.wait()
    elapsed = time.perf_counter() - t0
    await task
    return n / elapsed


async def baseline(bus: Bus, run: str, n: int) -> float:
    await publish_all(bus, run, n)
    cfg = api.ConsumerConfig(
        durable_name=f"raw-{run}",
        filter_subject=f"tg.{run}.>",
        ack_policy=api.AckPolicy.EXPLICIT,
        max_ack_pending=-1,
    )
    sub = await bus.js.pull_subscribe(f"tg.{run}.>", durable=f"raw-{run}", stream=STREAM, config=cfg)
    got = 0
    t0 = time.perf_counter()
    while got < n:
        for m in await sub.fetch(512, timeout=2):
            await m.ack()
            got += 1
    return n / (time.perf_counter() - t0)


async def latency(bus: Bus, run: str, rate: int, seconds: float) -> list[float]:
    lat: list[float] = []
    stop = asyncio.Event()
    total = int(rate * seconds)

    async def on(event, delivery):
        lat.append(time.time() - event.envelope.time)
        if len(lat) >= total:
            stop.set()

    consumer = Consumer(
        bus,
        f"lat-{run}",
        [f"tg.{run}.node.sampled.>"],
        on,
        ConsumerOptions(max_inflight=64, fetch_timeout_s=0.2),
    )
    task = asyncio.create_task(consumer.run(stop))
    await asyncio.sleep(0.5)  # consumer bound
    t0 = time.perf_counter()
    for i in range(total):
        target = t0 + i / rate
        delay = target - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        await bus.js.publish_async(
            f"tg.{run}.node.sampled.n{i:08d}",
            events.encode(make(run, i)),
            headers={"Nats-Msg-Id": f"{run}.{i}"},
        )
    await asyncio.wait_for(stop.wait(), 30)
    await task
    return lat


async def main(args) -> dict:
    with tempfile.TemporaryDirectory() as tmp, EmbeddedNats(tmp) as server:
        bus = await Bus.connect(server.url, "bench")
        await bus.ensure()
        rows = []
        for r in range(args.repeats):
            base = await baseline(bus, f"base{r}", args.events)
            mine = await ours(bus, f"ours{r}", args.events)
            rows.append((base, mine))
            print(f"repeat {r}: baseline {base:,.0f} ev/s, treegrpo consumer {mine:,.0f} ev/s")
        lats = sorted(await latency(bus, "lat", args.rate, args.seconds))
        await bus.close()
    p = lambda q: lats[min(len(lats) - 1, int(q * len(lats)))] * 1000  # noqa: E731
    result = {
        "date": time.strftime("%Y-%m-%d"),
        "machine": f"{platform.machine()} {platform.processor() or ''} "
        f"{__import__('os').cpu_count()} cores".strip(),
        "events": args.events,
        "repeats": args.repeats,
        "baseline_eps_median": statistics.median(b for b, _ in rows),
        "treegrpo_eps_median": statistics.median(m for _, m in rows),
        "latency_rate": args.rate,
        "latency_p50_ms": p(0.50),
        "latency_p99_ms": p(0.99),
    }
    result["ratio_vs_baseline"] = result["treegrpo_eps_median"] / result["baseline_eps_median"]
    print(json.dumps(result, indent=2))
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(result, fh, indent=2)
    return result


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, default=50_000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--rate", type=int, default=1000)
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--json", default="")
    import uvloop

    uvloop.run(main(ap.parse_args()))
