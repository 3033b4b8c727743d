"""The sharded learner (FSDP2 over N ranks) against the one-device learner, in one run.

    python3 benchmarks/learner_fsdp.py --out $OUT                 # every GPU of the machine
    python3 benchmarks/learner_fsdp.py --device cpu --gpus 2      # tiny shapes, 2 gloo ranks

Phases, each in fresh processes (so one phase's memory never counts against the next):
1. `8b-1gpu-baseline`: the one-device step (no sharding; today's path), 16x2048 on one GPU.
2. `8b-fsdp-wN`: N ranks, 16x2048 *per GPU* (N*16x2048 per step): tokens/s per GPU against 1.
   With one GPU (N = 1) this is the sharding machinery's own cost over a single rank.
3. `27b-fsdp-wN`: the 27B-class dense config (below), 8x8192 and 4x16384 tokens *per step*,
   gradient checkpointing, sharded over N ranks (one rank on a one-GPU machine: the memory plan).

The 27B-class config is Qwen3.6-27B's text decoder (= Qwen3.5-27B: 64 layers, hidden 5120, MLP
17408, 24 query / 4 KV heads of 256, vocab 248,320, untied head) built as a dense Qwen3 whose every
layer is full attention: the real model's 48 Gated DeltaNet layers cannot be packed without
flash-linear-attention (docs/LEARNER.md), and full attention is the heavier of the two at 8k-16k
tokens. It has 24.4 B parameters (the real 27B adds the DeltaNet projections, output gates, MTP
and the vision tower): the same width, depth and activation shapes, 49 GB of bf16 weights.

Models are random-init bf16 from their configs on the GPU; LoRA r32 on all linear layers, AdamW.
MFU counts 6*N*tokens (N = all base parameters) over 989 TFLOP/s per GPU, as learner_gpu.py does.
Results: `$OUT/learner_fsdp.json` (one row per measurement; every rank's peak memory).
Needs only torch, transformers, peft (what the GPU image has; no pydantic).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
os.environ.setdefault("NCCL_NVLS_ENABLE", "0")  # never NVLink multicast (KINDS.md)
os.environ.setdefault("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1")
os.environ.setdefault("NVSHMEM_DISABLE_NVLS", "1")

import torch  # noqa: E402

PEAK = 989e12
LORA = {"r": 32, "alpha": 32.0, "dropout": 0.0, "target_modules": "all-linear"}
SHAPES = {  # name: Qwen3Config kwargs (GPU), and the tiny stand-in used on the CPU
    "8b": dict(
        hidden_size=4096,
        num_hidden_layers=36,
        num_attention_heads=32,
        num_key_value_heads=8,
        intermediate_size=12288,
        vocab_size=151936,
        head_dim=128,
    ),
    "27b": dict(
        hidden_size=5120,
        num_hidden_layers=64,
        num_attention_heads=24,
        num_key_value_heads=4,
        intermediate_size=17408,
        vocab_size=248320,
        head_dim=256,
    ),
}
TINY = {
    "8b": dict(
        hidden_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        intermediate_size=192,
        vocab_size=512,
        head_dim=16,
    ),
    "27b": dict(
        hidden_size=96,
        num_hidden_layers=3,
        num_attention_heads=4,
        num_key_value_heads=2,
        intermediate_size=256,
        vocab_size=640,
        head_dim=24,
    ),
}


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def build_model(shape: str, device: torch.device, tiny: bool, checkpointing: bool):
    if shape == "27b-hybrid":  # Qwen3.6-27B's real shape (benchmarks/_hybrid_models.py)
        from types import SimpleNamespace

        from _hybrid_models import build

        model, n, cfg = build(
            "tiny" if tiny else "qwen36-27b", str(device), SimpleNamespace(**LORA), checkpointing
        )
        return model, n, cfg.vocab_size
    from transformers import Qwen3Config, Qwen3ForCausalLM

    from treegrpo_learner._attention import register
    from treegrpo_learner._model import wrap_lora

    register()
    cfg = Qwen3Config(
        **(TINY if tiny else SHAPES)[shape],
        tie_word_embeddings=False,
        use_cache=False,
        max_position_embeddings=40960,
    )
    cfg._attn_implementation = "tg_packed"
    torch.manual_seed(0)
    dtype = torch.float32 if tiny else torch.bfloat16
    with torch.device(device):
        model = Qwen3ForCausalLM._from_config(cfg, dtype=dtype)
    for p in model.parameters():
        p.requires_grad_(False)
    n = sum(p.numel() for p in model.parameters())
    if checkpointing:
        model.train()  # transformers checkpoints layers only in training mode (no dropout in Qwen3)
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    from types import SimpleNamespace

    return wrap_lora(model, SimpleNamespace(**LORA)), n, cfg.vocab_size


def make_samples(count: int, length: int, vocab: int, seed: int):
    from treegrpo_learner._trainer import TrainSample

    g = torch.Generator().manual_seed(seed)
    out = []
    for i in range(count):
        ids = torch.randint(0, vocab, (length,), generator=g).tolist()
        p = max(1, length // 8)
        out.append(
            TrainSample(
                f"g{i // 4}",
                f"n{i}",
                tuple(ids[:p]),
                tuple(ids[p:]),
                tuple([-2.0] * (length - p)),
                advantage=1.0 if i % 2 else -1.0,
            )
        )
    return out


def measure(trainer, batch, steps: int, device: torch.device) -> dict:
    """Median step time after one warm-up step; ranks are synchronised inside step()."""
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    trainer.step(batch)
    times, loss = [], None
    for _ in range(steps):
        t = time.perf_counter()
        loss = trainer.step(batch).metrics["loss"]
        times.append(time.perf_counter() - t)
    peak = torch.cuda.max_memory_allocated(device) / 2**30 if device.type == "cuda" else None
    return {"step_s": statistics.median(times), "times": times, "peak_gib": peak, "loss": loss}


def _hybrid_mfu(trainer, model, n: int, batch, row: dict) -> float:
    """MFU counted as benchmarks/_hybrid_models.py does (6N plus full-attention FLOPs), per GPU."""
    from _hybrid_models import layout_work, step_flops

    from treegrpo_learner._packing import SeqSpec

    seqs = [SeqSpec(s.prompt_ids, s.response_ids) for s in batch]
    tokens, pairs = layout_work(trainer._share(seqs, list(range(len(seqs))))[1])
    return step_flops(model.config, n, tokens, pairs) / row["step_s"] / PEAK


def phase_main(rank: int, world: int, job: dict, port: int, result: str) -> None:
    """One rank of one phase: build, shard (unless the baseline), time each batch, rank 0 writes."""
    import torch.distributed as dist

    from treegrpo_learner._ranks import init_ranks
    from treegrpo_learner._trainer import PolicyTrainer, TrainerSettings

    device = torch.device(f"cuda:{rank}" if job["device"] == "cuda" else "cpu")
    if device.type == "cpu":
        torch.set_num_threads(job["threads"])
    sharded = job["sharded"]
    ranks = init_ranks(rank, world, str(device), port, 1800) if sharded else None
    rows = []
    try:
        model, n, vocab = build_model(job["shape"], device, job["tiny"], job["checkpointing"])
        settings = TrainerSettings(
            device=str(device),
            dtype="float32" if job["tiny"] else "bfloat16",
            micro_batch_tokens=job["budget"],
            lr=1e-6,
        )
        trainer = PolicyTrainer(model, settings, ranks)
        for count, length in job["batches"]:
            per_rank = count if job["per_gpu"] else None
            total = count * world if job["per_gpu"] else count
            row = {
                "phase": job["name"],
                "shape": job["shape"],
                "world": world,
                "sharded": sharded,
                "n_params": n,
                "batch": f"{total}x{length}",
                "per_gpu_batch": f"{per_rank}x{length}" if per_rank else None,
                "tokens": total * length,
                "budget": job["budget"],
                "checkpointing": job["checkpointing"],
            }
            try:
                row.update(
                    measure(trainer, make_samples(total, length, vocab, seed=length), job["steps"], device)
                )
                row["tokens_per_s"] = row["tokens"] / row["step_s"]
                row["tokens_per_s_per_gpu"] = row["tokens_per_s"] / world
                row["mfu_6n"] = 6 * n * row["tokens_per_s_per_gpu"] / PEAK
                row["gdn_backend"] = trainer.policy.gdn_backend
                if job["shape"] == "27b-hybrid":  # plus the full-attention layers' FLOPs
                    row["mfu"] = _hybrid_mfu(
                        trainer, model, n, make_samples(total, length, vocab, length), row
                    )
            except torch.OutOfMemoryError as exc:
                row.update(
                    error="OOM",
                    detail=str(exc).splitlines()[0][:300],
                    peak_gib=torch.cuda.max_memory_allocated(device) / 2**30,
                )
            if sharded:  # every rank's peak memory
                peaks: list = [None] * world
                dist.all_gather_object(peaks, row.get("peak_gib"), group=ranks.control)
                row["peak_gib_per_rank"] = peaks
            rows.append(row)
            if rank == 0:
                log(json.dumps({k: v for k, v in row.items() if k != "times"}))
            if device.type == "cuda":
                torch.cuda.empty_cache()
    except Exception:
        rows.append({"phase": job["name"], "world": world, "error": traceback.format_exc()[-2000:]})
        log(rows[-1]["error"])
    if rank == 0:
        Path(result).write_text(json.dumps(rows))
    if sharded:
        dist.destroy_process_group()


def run_phase(job: dict, world: int) -> list[dict]:
    import torch.multiprocessing as mp

    from treegrpo_learner._ranks import free_port

    log(f"phase {job['name']}: {world} rank(s)")
    with tempfile.TemporaryDirectory() as tmp:
        result = Path(tmp) / "rows.json"
        try:
            mp.start_processes(
                phase_main, args=(world, job, free_port(), str(result)), nprocs=world, start_method="spawn"
            )
        except Exception as exc:  # a rank died (e.g. killed for memory): record it, go on
            return [{"phase": job["name"], "world": world, "error": f"{type(exc).__name__}: {exc}"[-2000:]}]
        return (
            json.loads(result.read_text())
            if result.exists()
            else [{"phase": job["name"], "error": "no result"}]
        )


def plan(args) -> list[tuple[dict, int]]:
    tiny = args.device == "cpu"
    scale = 32 if tiny else 1  # tiny shapes: 16x64 instead of 16x2048, and so on
    common = {"device": args.device, "tiny": tiny, "steps": args.steps, "threads": args.threads}
    b8 = [(16, 2048 // scale)]
    jobs = []
    if "8b" in args.parts:
        jobs.append(
            (
                {
                    **common,
                    "name": "8b-1gpu-baseline",
                    "shape": "8b",
                    "sharded": False,
                    "per_gpu": True,
                    "batches": b8,
                    "budget": args.budget // scale,
                    "checkpointing": False,
                },
                1,
            )
        )
        jobs.append(
            (
                {
                    **common,
                    "name": f"8b-fsdp-w{args.gpus}",
                    "shape": "8b",
                    "sharded": True,
                    "per_gpu": True,
                    "batches": b8,
                    "budget": args.budget // scale,
                    "checkpointing": False,
                },
                args.gpus,
            )
        )
    for part in [p for p in args.parts if p.startswith("27b")]:
        jobs.append(
            (
                {
                    **common,
                    "name": f"{part}-fsdp-w{args.gpus}",
                    "shape": part,
                    "sharded": True,
                    "per_gpu": False,
                    "batches": [(int(c), int(n) // scale) for c, n in (x.split("x") for x in args.sizes_27b)],
                    "budget": args.budget_27b // scale,
                    "checkpointing": True,
                    "steps": args.steps_27b,
                },
                args.gpus,
            )
        )
    return jobs


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    ap.add_argument(
        "--gpus", type=int, default=0, help="ranks of the sharded phases; 0 = every GPU (2 on the CPU)"
    )
    ap.add_argument("--parts", nargs="+", default=["8b", "27b"], choices=["8b", "27b", "27b-hybrid"])
    ap.add_argument("--sizes-27b", nargs="+", default=["8x8192", "4x16384"], help="27B batches per step")
    ap.add_argument("--steps", type=int, default=3, help="timed steps per 8B batch (after one warm-up)")
    ap.add_argument("--steps-27b", type=int, default=2, help="timed steps per 27B-class batch")
    ap.add_argument(
        "--budget", type=int, default=8192, help="micro-batch tokens, 8B (measured best, learner_gpu.py)"
    )
    ap.add_argument(
        "--budget-27b", type=int, default=16384, help="micro-batch tokens, 27B-class (checkpointed)"
    )
    ap.add_argument("--threads", type=int, default=1, help="torch threads per rank on the CPU")
    ap.add_argument("--out", default=os.environ.get("OUT", "out/bench"))
    args = ap.parse_args()
    if not args.gpus:
        args.gpus = torch.cuda.device_count() if args.device == "cuda" else 2
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    env = {
        "date": time.strftime("%Y-%m-%d"),
        "argv": sys.argv,
        "torch": torch.__version__,
        "gpus": args.gpus,
        "device": torch.cuda.get_device_name() if args.device == "cuda" else "cpu",
    }
    rows: list[dict] = []
    started = time.perf_counter()
    for job, world in plan(args):
        rows.extend(run_phase(job, world))
        (out / "learner_fsdp.json").write_text(json.dumps({**env, "results": rows}, indent=1))
    base = next((r for r in rows if r.get("phase") == "8b-1gpu-baseline" and "tokens_per_s" in r), None)
    fsdp = next(
        (r for r in rows if str(r.get("phase", "")).startswith("8b-fsdp") and "tokens_per_s" in r), None
    )
    if base and fsdp:
        env["per_gpu_ratio_8b"] = fsdp["tokens_per_s_per_gpu"] / base["tokens_per_s_per_gpu"]
        log(f"8B tokens/s per GPU, {args.gpus} rank(s) vs 1 GPU unsharded: {env['per_gpu_ratio_8b']:.3f}")
    env["wall_s"] = time.perf_counter() - started
    (out / "learner_fsdp.json").write_text(json.dumps({**env, "results": rows}, indent=1))
    log(f"wrote {out / 'learner_fsdp.json'} in {env['wall_s']:.0f}s")


if __name__ == "__main__":
    main()
