"""What a version's push costs with the adapter in float32 (the baseline) vs bfloat16 (issue 14's
follow-up: `learner.publish.dtype`, auto = the base's dtype).

One run, both dtypes interleaved, median of --repeats: the learner's `write_archive` (save_pretrained
+ the cast + tar) and the upload the learner then does (`Bus.put_object` into the adapter bucket
of a private nats-server: the object the samplers pull, sha256 included), for a LoRA r64 on every
linear layer of a random Qwen3 of `--hidden`/`--layers` (the default gives a ~46 MB float32 adapter;
an 8B r32 adapter is 349 MB: the ratio, not the seconds, carries over).

    python benchmarks/publish_dtype.py [--hidden 1024] [--layers 8] [--repeats 5] [--json out.json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import platform
import statistics
import tempfile
import time
from pathlib import Path

from treegrpo.bus import ADAPTERS, Bus
from treegrpo.embedded import EmbeddedNats
from treegrpo_learner._archive import write_archive
from treegrpo_learner._model import tiny_qwen3, wrap_lora
from treegrpo_learner.config import LoraSettings

DTYPES = ("float32", "bfloat16")


async def measure(model, work: Path, repeats: int) -> dict:
    server = EmbeddedNats(work / "nats").start()
    bus = await Bus.connect(server.url, "bench", 10)
    try:
        await bus.ensure()
        runs: dict[str, dict[str, list[float]]] = {
            d: {"write_s": [], "upload_s": [], "mb": []} for d in DTYPES
        }
        for r in range(repeats):
            for dtype in DTYPES:
                t0 = time.perf_counter()
                tar = write_archive(model, {"state": {}}, work / f"{dtype}.tar", dtype).path
                t1 = time.perf_counter()
                await bus.put_object(ADAPTERS, f"bench/{dtype}-{r}.tar", tar)
                t2 = time.perf_counter()
                runs[dtype]["write_s"].append(t1 - t0)
                runs[dtype]["upload_s"].append(t2 - t1)
                runs[dtype]["mb"].append(tar.stat().st_size / 1e6)
        return {d: {k: round(statistics.median(v), 3) for k, v in m.items()} for d, m in runs.items()}
    finally:
        await bus.close(2)
        server.stop()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--hidden", type=int, default=1024)
    ap.add_argument("--layers", type=int, default=8)
    ap.add_argument("--rank", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--json", default="")
    a = ap.parse_args()
    model = wrap_lora(
        tiny_qwen3(vocab=8192, hidden=a.hidden, layers=a.layers, heads=16, kv_heads=8),
        LoraSettings(r=a.rank, alpha=2 * a.rank),
    )
    with tempfile.TemporaryDirectory() as tmp:
        result = asyncio.run(measure(model, Path(tmp), a.repeats))
    f32, bf16 = result["float32"], result["bfloat16"]
    total = {d: result[d]["write_s"] + result[d]["upload_s"] for d in DTYPES}
    out = {
        "date": time.strftime("%Y-%m-%d"),
        "machine": f"{platform.node()} {platform.machine()}",
        "args": vars(a),
        "medians": result,
        "bytes_ratio": round(bf16["mb"] / f32["mb"], 3),
        "push_ratio": round(total["bfloat16"] / total["float32"], 3),
    }
    print(json.dumps(out, indent=1))
    if a.json:
        Path(a.json).write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
