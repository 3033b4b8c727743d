"""Sampler benchmark: sampled tokens/s for one group of 16 siblings, and the adapter swap time.

    .venv/bin/python benchmarks/sampler.py                      # hf backend on the CPU
    .venv/bin/python benchmarks/sampler.py --backend vllm       # the same measurement through vLLM

Throughput: one batched `generate(n=16)` of a real draft prompt against a baseline measured in the
same run: the 16 siblings generated one after another (`n=1`, the way a naive sampler would).
Swap: `load_adapter` of a rank-32 LoRA on every linear layer (the backend's in-place hot swap), and
the whole confirmed path: gRPC push of the tar -> sha256 check against `policy.published` on a real
embedded nats-server -> untar -> swap -> `policy.loaded`. Medians of `--repeats` runs; JSON on
stdout, a plot in docs/img/sampler_<backend>_<device>_<machine>.png.
"""

from __future__ import annotations

import argparse
import asyncio
import io
import json
import platform
import statistics
import sys
import tarfile
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rich.console import Console  # noqa: E402

from treegrpo.models import build_model  # noqa: E402
from treegrpo.prompts import render_prompt  # noqa: E402
from treegrpo_sampler import SamplerConfig, SamplingParams, create_backend  # noqa: E402

console = Console(stderr=True)
OUT = Path(__file__).resolve().parents[1] / "docs" / "img"
DESCRIPTION = (
    "# Spooky mini\nPredict which of three authors (EAP, HPL, MWS) wrote each sentence. "
    "Submissions are scored by multi-class log loss."
)
OVERVIEW = (
    "```\ninput/\n    description.md (1.2 kB)\n    sample_submission.csv (18.0 kB)\n    test.csv (90.1 kB)\n"
    "    train.csv (300.5 kB)\n```\n\n`input/train.csv` (2000 rows), first lines:\n```\nid,text,author\n"
    "id0,It was a dark and stormy night.,EAP\n```"
)


def messages() -> list[dict[str, str]]:
    return render_prompt("draft", DESCRIPTION, OVERVIEW)


async def throughput(backend, n: int, tokens: int, repeats: int) -> dict:
    msgs = messages()
    params = [SamplingParams(max_new_tokens=tokens, seed=100 + r) for r in range(repeats)]
    await backend.generate(msgs, 2, SamplingParams(max_new_tokens=8, seed=1))  # warm-up
    batched, sequential = [], []
    for r in range(repeats):
        t0 = time.perf_counter()
        comps = await backend.generate(msgs, n, params[r])
        batched.append(sum(len(c.token_ids) for c in comps) / (time.perf_counter() - t0))
        console.log(f"batched   run {r + 1}/{repeats}: {batched[-1]:.0f} tok/s")
        t0, total = time.perf_counter(), 0
        for i in range(n):
            one = await backend.generate(msgs, 1, SamplingParams(max_new_tokens=tokens, seed=1000 * r + i))
            total += len(one[0].token_ids)
        sequential.append(total / (time.perf_counter() - t0))
        console.log(f"sequential run {r + 1}/{repeats}: {sequential[-1]:.0f} tok/s")
    prompt_tokens = len(comps[0].prompt_token_ids)
    return {
        "group": n,
        "max_new_tokens": tokens,
        "prompt_tokens": prompt_tokens,
        "batched_tok_s": statistics.median(batched),
        "sequential_tok_s": statistics.median(sequential),
        "speedup": statistics.median(batched) / statistics.median(sequential),
        "runs_batched": batched,
        "runs_sequential": sequential,
    }


def lora_tar(model_dir: Path, out: Path, seed: int, rank: int) -> bytes:
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    torch.manual_seed(seed)
    targets = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
    peft = get_peft_model(
        AutoModelForCausalLM.from_pretrained(model_dir),
        LoraConfig(r=rank, lora_alpha=rank, target_modules=targets, init_lora_weights=False),
    )
    peft.save_pretrained(out)
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for f in sorted(out.iterdir()):
            tar.add(f, arcname=f.name)
    return buf.getvalue()


async def swap_times(backend, model_dir: Path, tmp: Path, repeats: int, rank: int) -> dict:
    from treegrpo import events
    from treegrpo.bus import ADAPTERS, Bus
    from treegrpo.embedded import EmbeddedNats
    from treegrpo.v1 import events_pb2 as pb
    from treegrpo_sampler import AdapterLoader, VersionGate, WeightReceiver, push_adapter

    tars = [lora_tar(model_dir, tmp / f"a{v}", v, rank) for v in range(1, 2 * repeats + 2)]
    backend_swaps = []
    for v in range(1, repeats + 1):
        folder = tmp / f"a{v}"
        t0 = time.perf_counter()
        await backend.load_adapter(v, folder)
        backend_swaps.append(time.perf_counter() - t0)
    server = EmbeddedNats(tmp / "nats").start()
    try:
        bus = await Bus.connect(server.url, "bench/sampler")
        await bus.ensure()
        loader = AdapterLoader(backend, bus, VersionGate(), "bench", tmp / "unpacked", "sampler/bench")
        receiver = WeightReceiver(loader, "127.0.0.1", 0)
        await receiver.start()
        pushes = []
        for v in range(repeats + 1, 2 * repeats + 1):
            data = tars[v - 1]
            sha, size = await bus.put_object(ADAPTERS, f"bench/v{v}.tar", data)
            await bus.publish(
                events.make_event(
                    "bench",
                    "learner/bench",
                    pb.PolicyPublished(version=v, adapter_key=f"bench/v{v}.tar", sha256=sha, bytes=size),
                )
            )
            t0 = time.perf_counter()
            ack = await push_adapter(receiver.address, "bench", v, data)
            pushes.append(time.perf_counter() - t0)
            assert ack.accepted, ack.reason
        await receiver.stop()
        await bus.close()
    finally:
        server.stop()
    return {
        "lora_rank": rank,
        "adapter_tar_bytes": len(tars[0]),
        "backend_swap_s": statistics.median(backend_swaps),
        "push_verify_swap_confirm_s": statistics.median(pushes),
        "runs_backend_swap": backend_swaps,
        "runs_push": pushes,
    }


def plot(result: dict) -> Path | None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    t = result["throughput"]
    fig, ax = plt.subplots(figsize=(5, 3))
    ax.bar(
        ["16 siblings,\none batch", "16 samples,\none by one"],
        [t["batched_tok_s"], t["sequential_tok_s"]],
        color=["#2a7", "#999"],
    )
    ax.set_ylabel("sampled tokens / s")
    ax.set_title(
        f"{result['backend']} backend, {result['model_params'] / 1e6:.0f}M model, {result['machine']}"
    )
    fig.tight_layout()
    OUT.mkdir(exist_ok=True)
    tag = "".join(
        ch if ch.isalnum() else "_" for ch in f"{result['backend']}_{result['device']}_{result['machine']}"
    )
    path = OUT / f"sampler_{tag}.png"
    fig.savefig(path, dpi=120)
    return path


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--backend", default="hf", choices=["hf", "vllm"])
    ap.add_argument("--model", default="", help="model folder; empty = build the `small` model in a temp dir")
    ap.add_argument("--group", type=int, default=16)
    ap.add_argument("--tokens", type=int, default=128)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--rank", type=int, default=32)
    ap.add_argument("--device", default="cpu", help="hf backend device (cpu, cuda)")
    ap.add_argument("--threads", type=int, default=0, help="torch threads (0 = torch's default)")
    ap.add_argument("--label", default="", help="machine label in the result and the plot's file name")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as td:
        tmp = Path(td)
        model = Path(args.model) if args.model else build_model(tmp / "small", size="small")
        backend = create_backend(
            SamplerConfig(
                backend=args.backend,
                model=str(model),
                hf={"device": args.device, "torch_threads": args.threads},
            )
        )
        info = (
            json.loads((model / "treegrpo_model.json").read_text())
            if (model / "treegrpo_model.json").exists()
            else {}
        )
        import os

        import torch

        result = {
            "date": time.strftime("%Y-%m-%d"),
            "backend": args.backend,
            "model_params": info.get("params", 0),
            "machine": args.label or f"{platform.machine()}, {os.cpu_count()} cores",
            "device": args.device,
            "torch_threads": torch.get_num_threads(),
            "load_avg_1m": os.getloadavg()[0],
        }
        result["throughput"] = await throughput(backend, args.group, args.tokens, args.repeats)
        result["swap"] = await swap_times(backend, model, tmp, args.repeats, args.rank)
        await backend.close()
    path = plot(result)
    if path:
        result["plot"] = str(path)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    asyncio.run(main())
