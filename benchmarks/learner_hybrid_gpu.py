"""The learner on the seed's hybrid models (Qwen3.5-9B, Qwen3.6-27B shapes; `_hybrid_models.py`), one GPU.

    python3 benchmarks/learner_hybrid_gpu.py --shape qwen35-9b --phases mfu shared head --out $OUT
    python3 benchmarks/learner_hybrid_gpu.py --shape qwen36-27b --phases fit --ckpt-budgets 16384 --out $OUT

Phases (each: one warm-up step, then `--steps` timed; the median):
- `mfu`: 16x2048 (prompt 1/8, every prompt distinct), per `--budgets`; MFU as `_hybrid_models` counts.
- `shared`: one GRPO group, G = 16 responses of R tokens to one prompt of P (`--shared PxR ...`):
  the per-sequence path (`share_prompts = false`) and the shared-prompt path on the same batch and
  budget; learner tokens/s = the group's per-sequence tokens (16 * (P + R)) over the step time.
- `head`: 8x8192 with the LM head as chunked log-probs (ours), the previous chunked version
  (`--today`: a checkout of the code before this change) and full-vocabulary float32 logits;
  the step's peak memory and time.
- `fit`: 8x8192 and 4x16384, every layer checkpointed at `--ckpt-budgets`, then none at `--budgets`.
The Gated DeltaNet kernels are `--backend` (fla or torch); every row records which ran.
A measurement is skipped when fewer than `--reserve` seconds remain of `--deadline`.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import statistics
import sys
import time
import traceback
from pathlib import Path
from types import SimpleNamespace

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "services" / "learner"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402
from _hybrid_models import PEAK, build, layout_work, step_flops  # noqa: E402

LORA = SimpleNamespace(r=32, alpha=32.0, dropout=0.0, target_modules="all-linear")
START = time.monotonic()
CUDA = torch.cuda.is_available()
RESULTS: list[dict] = []


def log(msg: str) -> None:
    print(f"[{time.monotonic() - START:6.0f}s] {msg}", flush=True)


def samples(shape: list[tuple[int, int]], vocab: int, shared: bool, seed: int = 0):
    from treegrpo_learner._trainer import TrainSample

    g = torch.Generator().manual_seed(seed)
    prompt = torch.randint(0, vocab, (shape[0][0],), generator=g).tolist()
    out = []
    for i, (p, r) in enumerate(shape):
        if not shared:
            prompt = torch.randint(0, vocab, (p,), generator=g).tolist()
        resp = tuple(torch.randint(0, vocab, (r,), generator=g).tolist())
        adv = 1.0 if i % 2 else -1.0
        out.append(TrainSample("g", f"n{i}", tuple(prompt[:p]), resp, tuple([-2.0] * r), adv))
    return out


def measure(name: str, trainer, batch, n: int, cfg, args, extra: dict) -> dict:
    row = {"name": name, "backend": trainer.policy.gdn_backend, **extra}
    left = args.deadline - (time.monotonic() - START)
    if left < args.reserve:
        row["skipped"] = f"{left:.0f} s left of the deadline"
        log(f"{name}: skipped ({row['skipped']})")
        RESULTS.append(row)
        return row
    from treegrpo_learner._packing import SeqSpec

    seqs = [SeqSpec(s.prompt_ids, s.response_ids) for s in batch]
    tokens, pairs = layout_work(trainer._share(seqs, list(range(len(seqs))))[1])
    learner_tokens = sum(s.length for s in seqs)
    try:
        if CUDA:
            torch.cuda.reset_peak_memory_stats()
        times = []
        for k in range(args.steps + 1):
            t = time.perf_counter()
            trainer.step(batch)
            if CUDA:
                torch.cuda.synchronize()
            if k:
                times.append(time.perf_counter() - t)
            else:
                row["warmup_s"] = time.perf_counter() - t
        step = statistics.median(times)
        flops = step_flops(cfg, n, tokens, pairs)
        row.update(step_s=step, times=times, tokens_run=tokens, attention_pairs=pairs)
        row.update(learner_tokens=learner_tokens, learner_tokens_per_s=learner_tokens / step)
        row.update(mfu=flops / step / PEAK, mfu_6n_only=6 * n * tokens / step / PEAK)
        row["peak_gib"] = torch.cuda.max_memory_allocated() / 2**30 if CUDA else 0.0
        log(
            f"{name}: {step:.3f} s, {learner_tokens / step:,.0f} tok/s, "
            f"MFU {row['mfu']:.1%}, {row['peak_gib']:.1f} GiB"
        )
    except torch.OutOfMemoryError as exc:
        row.update(error="OOM", detail=str(exc)[:300], peak_gib=torch.cuda.max_memory_allocated() / 2**30)
        log(f"{name}: OOM")
    except Exception as exc:
        row.update(error=type(exc).__name__, detail=traceback.format_exc()[-2000:])
        log(f"{name}: FAILED {exc!r}")
    if CUDA:
        torch.cuda.empty_cache()
    RESULTS.append(row)
    return row


def trainer_for(model, args, budget: int, share: bool = True):
    from treegrpo_learner._trainer import PolicyTrainer, TrainerSettings

    cfg = TrainerSettings(
        device="cuda" if CUDA else "cpu",
        dtype="bfloat16",
        lr=1e-6,
        micro_batch_tokens=budget,
        share_prompts=share,
        gdn_backend=args.backend,
    )
    return PolicyTrainer(model, cfg)


def phase_mfu(model, n, cfg, args) -> None:
    batch = samples([(256, 1792)] * 16, cfg.vocab_size, shared=False)
    for b in args.budgets:
        measure(f"mfu 16x2048 budget {b}", trainer_for(model, args, b), batch, n, cfg, args, {"budget": b})


def phase_shared(model, n, cfg, args) -> None:
    for spec in args.shared:
        p, r = map(int, spec.split("x"))
        batch = samples([(p, r)] * 16, cfg.vocab_size, shared=True)
        rows = [
            measure(
                f"shared {spec} {'on' if share else 'off'}",
                trainer_for(model, args, args.shared_budget, share),
                batch,
                n,
                cfg,
                args,
                {"prompt": p, "response": r, "group": 16, "share": share, "budget": args.shared_budget},
            )
            for share in (False, True)
        ]
        if all("step_s" in x for x in rows):
            rows[1]["speedup_vs_per_sequence"] = rows[0]["step_s"] / rows[1]["step_s"]
            log(f"shared {spec}: {rows[1]['speedup_vs_per_sequence']:.2f}x the per-sequence path")


def _full_head(hidden, weight, targets, chunk=0):
    """The naive head: every row's float32 logits at once, log_softmax, autograd keeps them."""
    logq = torch.log_softmax((hidden @ weight.t()).float(), -1)
    entropy = -(logq.exp() * logq).sum(-1).detach()
    return logq.gather(1, targets[:, None].long()).squeeze(1), entropy


def phase_head(model, n, cfg, args) -> None:
    import treegrpo_learner._logprobs as lp

    ours = lp.chunked_logprobs
    heads = {"chunked (ours)": ours, "full float32 logits": _full_head}
    if args.today:
        spec = importlib.util.spec_from_file_location(
            "_old_logprobs", Path(args.today) / "treegrpo/services/learner/_logprobs.py"
        )
        old = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(old)
        heads["chunked (before)"] = old.chunked_logprobs
    batch = samples([(1024, 7168)] * 8, cfg.vocab_size, shared=False)
    try:
        for label, fn in heads.items():
            lp.chunked_logprobs = fn
            tr = trainer_for(model, args, args.head_budget)
            measure(
                f"head 8x8192 {label}", tr, batch, n, cfg, args, {"head": label, "budget": args.head_budget}
            )
    finally:
        lp.chunked_logprobs = ours


def phase_fit(model, n, cfg, args) -> None:
    """The seed's long batches: without checkpointing at `--budgets`, then with it at `--ckpt-budgets`."""
    base = model.get_base_model()
    for ckpt, budgets in ((True, args.ckpt_budgets), (False, args.budgets)):
        if ckpt:
            base.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        for count, length in ((8, 8192), (4, 16384)):
            batch = samples([(length // 8, length - length // 8)] * count, cfg.vocab_size, shared=False)
            for b in budgets:
                extra = {"batch": f"{count}x{length}", "budget": b, "checkpointing": ckpt}
                tr = trainer_for(model, args, b)
                measure(f"fit {count}x{length} budget {b} ckpt={ckpt}", tr, batch, n, cfg, args, extra)
        base.gradient_checkpointing_disable()


def environment() -> dict:
    import transformers

    if not CUDA:
        return {"name": "env", "torch": torch.__version__, "device": "cpu (smoke run)"}
    import triton

    a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    for _ in range(3):
        a @ a
    torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(20):
        a @ a
    torch.cuda.synchronize()
    env = {
        "name": "env",
        "torch": torch.__version__,
        "triton": triton.__version__,
        "transformers": transformers.__version__,
    }
    env.update(
        gpu=torch.cuda.get_device_name(), matmul_tflops=20 * 2 * 8192**3 / (time.perf_counter() - t) / 1e12
    )
    try:
        import fla

        env["fla"] = getattr(fla, "__version__", "?")
    except Exception as exc:
        env["fla"] = f"not importable: {exc!r}"[:200]
    return env


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--shape", choices=["qwen35-9b", "qwen36-27b", "tiny"], default="qwen35-9b")
    ap.add_argument("--backend", choices=["auto", "fla", "torch"], default="fla")
    ap.add_argument("--phases", nargs="+", default=["mfu"], choices=["mfu", "shared", "head", "fit"])
    ap.add_argument("--budgets", type=int, nargs="+", default=[8192])
    ap.add_argument("--shared", nargs="+", default=["4096x1024"])
    ap.add_argument("--shared-budget", type=int, default=8192)
    ap.add_argument("--head-budget", type=int, default=8192)
    ap.add_argument("--ckpt-budgets", type=int, nargs="*", default=[], help="fit: budgets checkpointed")
    ap.add_argument("--today", default="", help="checkout of the previous learner (for the head phase)")
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--deadline", type=float, default=1e9, help="seconds this script may run")
    ap.add_argument("--reserve", type=float, default=60.0)
    ap.add_argument("--tag", default="")
    ap.add_argument("--out", default="out/bench")
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"learner_hybrid_{args.tag or args.shape}.json"
    try:
        RESULTS.append(environment())
        log(json.dumps(RESULTS[-1]))
        model, n, cfg = build(args.shape, "cuda" if CUDA else "cpu", LORA)
        trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
        RESULTS.append({"name": "model", "shape": args.shape, "n_params": n, "lora_params": trainable})
        log(
            f"{args.shape}: N = {n / 1e9:.3f} B, LoRA {trainable / 1e6:.1f} M, "
            f"built in {time.monotonic() - START:.0f} s"
        )
        for ph in args.phases:
            globals()[f"phase_{ph}"](model, n, cfg, args)
            path.write_text(
                json.dumps(
                    {"date": time.strftime("%Y-%m-%d"), "argv": sys.argv, "results": RESULTS}, indent=1
                )
            )
    finally:
        path.write_text(
            json.dumps({"date": time.strftime("%Y-%m-%d"), "argv": sys.argv, "results": RESULTS}, indent=1)
        )
        log(f"wrote {path}")


if __name__ == "__main__":
    main()
