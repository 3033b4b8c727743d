"""Where vLLM's decode time goes at the seed's shape, and the hf backend's swap as a baseline (issue 14).

`profile_phase`: vLLM's offline engine in this process (VLLM_ENABLE_V1_MULTIPROCESSING=0, so
torch.profiler sees the engine's CUDA kernels, CUDA-graph replays included), 4 distinct ~2k-token
prompts x 16 siblings = 64 sequences, a short decode with the LoRA adapter and one without. Kernel
time is summed by name and put in buckets (GEMM, LoRA, attention, ...); the GPU's idle share of
the profiled wall time is what the scheduler and the host cost.

`hf_swap_phase`: the sampler's hf backend loading the same 8B r32 adapter for new versions: the
baseline for vLLM's `add_lora`, timed on the same adapter in the same run.
"""

from __future__ import annotations

import os
import re
import statistics
import time
from pathlib import Path

BUCKETS = (  # first match wins: LoRA before GEMM (punica kernels are matmuls too)
    ("lora", r"lora|punica|sgmv|bgmv|shrink|expand"),
    ("attention", r"flash|fmha|attn|attention|paged|reshape_and_cache|merge_attn"),
    ("gemm", r"gemm|cutlass|sm90_|sm100_|nvjet|xmma|cublas|matmul|splitk"),
    ("norm_act_rope", r"rms|norm|silu|act_and_mul|rotary|rope|gelu"),
    ("sampling", r"sampl|topk|top_k|softmax|argmax|sort|exponential|multinomial|gumbel|log_softmax"),
    ("copy_elementwise", r"memcpy|memset|copy|elementwise|vectorized|reduce|fill|cat|index|gather|scatter"),
)


def bucket(name: str) -> str:
    low = name.lower()
    for label, pattern in BUCKETS:
        if re.search(pattern, low):
            return label
    return "other"


def kernel_table(prof, wall_s: float, steps: int) -> dict:
    """Kernel time by bucket (share of kernel time, ms per decode step) and the GPU's busy share."""
    by_name: dict[str, float] = {}
    for evt in prof.events():
        if getattr(evt, "device_type", None) is None or str(evt.device_type) != "DeviceType.CUDA":
            continue
        by_name[evt.name] = by_name.get(evt.name, 0.0) + evt.time_range.elapsed_us() / 1e6  # the kernel span
    total = sum(by_name.values()) or 1e-12
    buckets: dict[str, float] = {}
    for name, sec in by_name.items():
        buckets[bucket(name)] = buckets.get(bucket(name), 0.0) + sec
    top = sorted(by_name.items(), key=lambda kv: -kv[1])[:15]
    return {
        "wall_s": round(wall_s, 3),
        "kernel_s": round(total, 3),
        "decode_steps": steps,
        "gpu_busy_share": round(total / wall_s, 3),
        "buckets": {
            k: {"share": round(v / total, 3), "ms_per_step": round(1e3 * v / steps, 3)}
            for k, v in sorted(buckets.items(), key=lambda kv: -kv[1])
        },
        "top_kernels": [{"name": n[:120], "share": round(s / total, 4), "bucket": bucket(n)} for n, s in top],
    }


def _engine(model_dir: Path, rank: int, mem: float):
    os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"  # engine core in this process: the profiler sees it
    from vllm import LLM

    return LLM(
        model=str(model_dir),
        dtype="bfloat16",
        enable_lora=True,
        max_lora_rank=rank,
        max_loras=2,
        max_num_seqs=64,
        max_model_len=4096,
        gpu_memory_utilization=mem,
        seed=0,
        enable_prefix_caching=True,
    )


def _prompts(model_dir: Path, groups: int, tokens: int, salt: str) -> list[str]:
    from transformers import AutoTokenizer

    from benchmarks import _vllm_gpu_models as M

    tok = AutoTokenizer.from_pretrained(str(model_dir))
    chats = M.long_prompts(model_dir, groups, tokens)
    return [
        f"{salt}\n" + tok.apply_chat_template(c, tokenize=False, add_generation_prompt=True) for c in chats
    ]


def _decode(llm, prompts: list[str], group: int, tokens: int, lora, seed: int) -> tuple[float, int]:
    from vllm import SamplingParams

    sp = SamplingParams(n=group, max_tokens=tokens, min_tokens=tokens, temperature=1.0, seed=seed)
    t0 = time.perf_counter()
    outs = llm.generate(prompts, sp, lora_request=lora, use_tqdm=False)
    return time.perf_counter() - t0, sum(len(c.token_ids) for o in outs for c in o.outputs)


def profile_phase(a, rec, model_dir: Path, adapters: list[Path]) -> None:
    import torch
    from torch.profiler import ProfilerActivity, profile
    from vllm.lora.request import LoRARequest

    def sync() -> None:
        if torch.cuda.is_available():
            torch.cuda.synchronize()

    t0 = time.perf_counter()
    llm = _engine(model_dir, a.rank, a.gpu_memory_utilization)
    rec["profile_engine_start_s"] = round(time.perf_counter() - t0, 1)
    adds = []
    for i, path in enumerate(adapters[:2] * 2, start=1):  # vLLM's own swap, same adapters as hf's below
        t = time.perf_counter()
        llm.llm_engine.add_lora(LoRARequest(f"v{i}", i, str(path)))
        adds.append(round(time.perf_counter() - t, 3))
    rec["vllm_add_lora_s"] = {"runs": adds, "median": statistics.median(adds)}
    lora = LoRARequest("v1", 1, str(adapters[0]))
    _decode(llm, _prompts(model_dir, a.groups, a.prompt_tokens, "warm"), 2, 16, lora, 0)
    steps = a.profile_tokens
    for label, req in (("lora", lora), ("base", None)):
        prompts = _prompts(model_dir, a.groups, a.prompt_tokens, f"profile {label}")
        _decode(llm, prompts, a.group, 1, req, 1)  # prefill outside the profile: decode only
        sync()
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            wall, n = _decode(llm, prompts, a.group, steps, req, 2)  # prefix-cached prompts: ~pure decode
            sync()
        table = kernel_table(prof, wall, steps)
        table["tok_s"] = round(n / wall)
        rec[f"profile_{label}"] = table
    del llm


async def hf_swap_phase(a, rec, model_dir: Path, adapters: list[Path]) -> None:
    from treegrpo_sampler.backends._hf import HfBackend

    hf = HfBackend(model_dir, a.device, a.dtype)
    runs = []
    for version, path in enumerate(adapters[:2] * 2, start=1):
        t = time.perf_counter()
        await hf.load_adapter(version, path)
        runs.append(round(time.perf_counter() - t, 3))
    rec["hf_load_adapter_s"] = {"runs": runs, "median": statistics.median(runs)}
    await hf.close()
