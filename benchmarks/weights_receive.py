"""A pushed adapter's way in to the sampler, up to its sha256 check: gRPC chunks of 1 MiB streamed
from the archive file by the learner's push (`treegrpo_learner._publish.push`) into the sampler's
`WeightReceiver`, spooled to disk and hashed, then
`AdapterLoader.load_archive`'s check of the hash against the push's claim.

The push claims a wrong sha256, so every run ends at that check (refused) and nothing after it
(policy.published lookup, untar, load) is timed: the part a change to the receiver can move. Run it
on two checkouts to compare them (the receiver hashes the bytes as they arrive since 2026-12-06;
before, the loader read the spooled archive again to hash it):

    python benchmarks/weights_receive.py --mb 173 467 --repeats 5 [--json out.json]
    PYTHONPATH=<old checkout>/services/sampler python benchmarks/weights_receive.py ...

Sizes: the seed presets' bf16 LoRA r32 adapters, 173 MB (Qwen3.5-9B) and 467 MB (Qwen3.6-27B).
The loader's backend is the hf one on the tiny local model (built by `treegrpo model init`).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import treegrpo_sampler
from treegrpo_learner._publish import Published, push
from treegrpo_sampler import (
    AdapterLoader,
    SamplerConfig,
    VersionGate,
    WeightReceiver,
    create_backend,
)


async def serve(work: Path, model: Path) -> None:
    """The sampler's side, in its own process as in a run: prints its address, serves until killed."""
    backend = create_backend(SamplerConfig(backend="hf", model=str(model)))
    loader = AdapterLoader(backend, None, VersionGate(), "bench", work / "loaded", "sampler/bench")
    receiver = WeightReceiver(loader, port=0, spool_dir=work)
    print(await receiver.start(), flush=True)
    await asyncio.Event().wait()


async def measure(archive: Path, address: str, repeats: int) -> list[float]:
    claim = Published(1, "bench/v1.tar", "0" * 64, archive.stat().st_size, archive)  # a wrong sha256
    seconds = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        ack = await push(address, "bench", claim, timeout_s=600)
        seconds.append(time.perf_counter() - t0)
        assert not ack.accepted and "sha256" in ack.reason, ack.reason
    return seconds


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mb", type=int, nargs="+", default=[173, 467])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--json", default="")
    ap.add_argument("--serve", nargs=2, metavar=("WORK", "MODEL"), help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.serve:
        asyncio.run(serve(Path(a.serve[0]), Path(a.serve[1])))
        return
    out = {"date": time.strftime("%Y-%m-%d"), "machine": f"{platform.node()} {os.cpu_count()} cpus"}
    out["sampler_package"] = str(Path(treegrpo_sampler.__file__).parent)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        model = work / "model"
        cmd = [sys.executable, "-m", "treegrpo.cli", "model", "init", str(model), "--size", "tiny"]
        subprocess.run(cmd, check=True, capture_output=True)
        server = subprocess.Popen(
            [sys.executable, __file__, "--serve", str(work), str(model)],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        try:
            address = server.stdout.readline().strip()
            for mb in a.mb:
                archive = work / f"a{mb}.tar"
                archive.write_bytes(os.urandom(mb * 10**6))
                s = asyncio.run(measure(archive, address, a.repeats))
                out[f"{mb}MB"] = {
                    "median_s": round(statistics.median(s), 3),
                    "runs_s": [round(x, 3) for x in s],
                }
                print(mb, "MB:", out[f"{mb}MB"])
        finally:
            server.kill()
            server.wait()
    if a.json:
        Path(a.json).write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
