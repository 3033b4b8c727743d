"""Bytes per node each service reads, for a group as the sampler records it now (each node's
training payload in its own `tokens.recorded`) and as it recorded it before (the payload inline in
`node.sampled`): the executor's durable consumer, the grader's lookup of a node, the learner's read
of the whole group (requests, messages, bytes per node).

    .venv/bin/python benchmarks/node_bytes.py [--group-size 16] [--tokens 1200 2048] [--json OUT]

The facts come from the sampler's own builder with a real task's draft prompt (tests/node_payload.py);
bytes are message payloads as the services' bus clients count them (`Consumer.received_bytes`,
`Bus.reads.payload_bytes`), on a private nats-server. The counts are exact: one run is enough.
Results: the "Bytes per node" rows of docs/PERFORMANCE.md ("Bus").
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.node_payload import node_reads, sampled_group  # noqa: E402
from treegrpo.bus import Bus  # noqa: E402
from treegrpo.embedded import EmbeddedNats  # noqa: E402


async def measure(url: str, g: int, tokens: int) -> dict:
    bus = await Bus.connect(url, "bench/node-bytes", 10)
    try:
        await bus.ensure()
        out = {}
        for shape, inline in (("inline", True), ("apart", False)):
            run = f"nb{shape}{tokens}"
            out[shape] = dataclasses.asdict(await node_reads(bus, run, sampled_group(run, g, tokens, inline)))
        return out
    finally:
        await bus.close(2)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--group-size", type=int, default=16)
    ap.add_argument("--tokens", type=int, nargs="+", default=[1200, 2048], help="response tokens per node")
    ap.add_argument("--json", type=Path, help="write the results here too")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        server = EmbeddedNats(Path(tmp) / "nats").start()
        try:
            results = {t: asyncio.run(measure(server.url, args.group_size, t)) for t in args.tokens}
        finally:
            server.stop()
    print("| response tokens | reader | inline (before) | apart (after) |")
    print("|---|---|---|---|")
    for t, r in results.items():
        before, after = r["inline"], r["apart"]
        print(f"| {t} | executor, bytes per node | {before['executor']:,} | {after['executor']:,} |")
        print(f"| {t} | grader lookup, bytes per node | {before['grader']:,} | {after['grader']:,} |")
        print(
            f"| {t} | learner, per group (G = {args.group_size}) | {before['learner_batches']} request, "
            f"{before['learner_messages']} messages, {before['learner']:,} B/node | "
            f"{after['learner_batches']} request, {after['learner_messages']} messages, "
            f"{after['learner']:,} B/node |"
        )
    if args.json:
        args.json.write_text(json.dumps({"group_size": args.group_size, "results": results}, indent=2) + "\n")


if __name__ == "__main__":
    main()
