"""Learner step throughput and memory on one GPU: our packed/chunked step against the naive
transformers+peft step, measured in the same process.

    python3 benchmarks/learner_gpu.py --part qwen3 --out $OUT          # 8B-class Qwen3
    python3 benchmarks/learner_gpu.py --part qwen35 --tag nofla --out $OUT
    PYTHONPATH=<fla wheels> python3 benchmarks/learner_gpu.py --part qwen35 --tag fla --out $OUT

Models are randomly initialised from their configs on the GPU (no weights are downloaded).
MFU counts 6 * N * tokens per step (N = all parameters of the base model, embeddings and LM head
included, as the issue counts) over the H200's dense bf16 datasheet peak of 989 TFLOP/s; the
matrix-product rate measured in the same run is printed beside it. A LoRA step really does about
4N (no weight gradients for frozen weights) plus attention, so the 6N count flatters every
variant by the same factor: the ratio against the baseline is what compares.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
import traceback
from pathlib import Path
from types import SimpleNamespace

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

from treegrpo_learner._logprobs import full_logprobs  # noqa: E402
from treegrpo_learner._model import parts, wrap_lora  # noqa: E402
from treegrpo_learner._packing import SeqSpec  # noqa: E402
from treegrpo_learner._trainer import PolicyTrainer, TrainerSettings, TrainSample  # noqa: E402

PEAK = 989e12
LORA = SimpleNamespace(r=32, alpha=32.0, dropout=0.0, target_modules="all-linear")
RESULTS: list[dict] = []


def log(msg: str) -> None:
    print(msg, flush=True)


def matmul_ceiling() -> float:
    a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    for _ in range(3):
        a @ b
    times = []
    for _ in range(10):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        a @ b
        e.record()
        torch.cuda.synchronize()
        times.append(s.elapsed_time(e) / 1e3)
    return 2 * 8192**3 / statistics.median(times)


def build(part: str):
    from treegrpo_learner._attention import register

    register()
    if part == "qwen3":
        from transformers import Qwen3Config, Qwen3ForCausalLM

        cfg = Qwen3Config(
            hidden_size=4096,
            num_hidden_layers=36,
            num_attention_heads=32,
            num_key_value_heads=8,
            intermediate_size=12288,
            vocab_size=151936,
            head_dim=128,
            tie_word_embeddings=False,
            max_position_embeddings=40960,
            use_cache=False,
        )
        cls = Qwen3ForCausalLM
    else:
        from transformers import Qwen3_5ForCausalLM, Qwen3_5TextConfig

        cfg = Qwen3_5TextConfig(use_cache=False)
        cls = Qwen3_5ForCausalLM
    cfg._attn_implementation = "tg_packed"
    torch.manual_seed(0)
    with torch.device("cuda"):
        model = cls._from_config(cfg, dtype=torch.bfloat16)
    for p in model.parameters():
        p.requires_grad_(False)
    n = sum(p.numel() for p in model.parameters())
    return wrap_lora(model, LORA), n, cfg


def make_samples(
    lengths: list[int], vocab: int, prompt_frac: float = 0.125, seed: int = 0
) -> list[TrainSample]:
    g = torch.Generator().manual_seed(seed)
    out = []
    for i, n in enumerate(lengths):
        p = max(1, int(n * prompt_frac))
        ids = torch.randint(0, vocab, (n,), generator=g).tolist()
        resp = tuple(ids[p:])
        out.append(
            TrainSample(
                f"g{i // 4}",
                f"n{i}",
                tuple(ids[:p]),
                resp,
                tuple([-2.0] * len(resp)),
                advantage=(1.0 if i % 2 else -1.0),
            )
        )
    return out


def timed(fn, steps: int) -> tuple[float, list[float], float]:
    torch.cuda.reset_peak_memory_stats()
    fn()  # warm-up (allocator, kernels, autotuning)
    torch.cuda.synchronize()
    times = []
    for _ in range(steps):
        t = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        times.append(time.perf_counter() - t)
    return statistics.median(times), times, torch.cuda.max_memory_allocated() / 2**30


def record(name: str, n_params: int, tokens: int, fn, steps: int, extra: dict | None = None) -> None:
    row = {"name": name, "tokens": tokens, **(extra or {})}
    try:
        med, times, peak = timed(fn, steps)
        tps = tokens / med
        row.update(step_s=med, times=times, tokens_per_s=tps, mfu_6n=6 * n_params * tps / PEAK, peak_gib=peak)
        log(f"{name:48s} {med:7.3f}s {tps:9.0f} tok/s  MFU(6N) {row['mfu_6n']:.1%}  peak {peak:6.1f} GiB")
    except torch.OutOfMemoryError as exc:
        row.update(
            error="OOM",
            detail=str(exc).splitlines()[0][:300],
            peak_gib=torch.cuda.max_memory_allocated() / 2**30,
        )
        log(f"{name:48s} OOM ({row['peak_gib']:.1f} GiB peak before failing)")
    except Exception as exc:  # keep measuring the other variants
        row.update(error=type(exc).__name__, detail=traceback.format_exc()[-1500:])
        log(f"{name:48s} FAILED {type(exc).__name__}: {exc}")
    torch.cuda.empty_cache()
    RESULTS.append(row)


def naive_step(model, samples, opt, mbs: int):
    """What a plain transformers+peft step does: padded [B, T] batch, full float32 logits,
    log_softmax, gradient checkpointing, AdamW."""

    def run():
        opt.zero_grad(set_to_none=True)
        total = sum(len(s.response_ids) for s in samples)
        for k in range(0, len(samples), mbs):
            chunk = samples[k : k + mbs]
            width = max(len(s.prompt_ids) + len(s.response_ids) for s in chunk)
            ids = torch.zeros(len(chunk), width, dtype=torch.long)
            mask = torch.zeros(len(chunk), width, dtype=torch.float32)
            adv = torch.zeros(len(chunk), 1)
            for j, s in enumerate(chunk):
                seq = list(s.prompt_ids) + list(s.response_ids)
                ids[j, : len(seq)] = torch.tensor(seq)
                mask[j, len(s.prompt_ids) : len(seq)] = 1.0
                adv[j] = s.advantage
            ids, mask, adv = ids.cuda(), mask.cuda(), adv.cuda()
            with torch.autocast("cuda", dtype=torch.bfloat16):
                logits = model(input_ids=ids).logits
            logp = torch.log_softmax(logits.float(), -1)[:, :-1].gather(2, ids[:, 1:, None]).squeeze(2)
            ratio = torch.exp(logp - logp.detach())
            loss = -(adv * ratio * mask[:, 1:]).sum() / total
            loss.backward()
            del logits, logp
        torch.nn.utils.clip_grad_norm_([p for p in model.parameters() if p.requires_grad], 1.0)
        opt.step()

    return run


def check_correctness(model, vocab: int) -> dict:
    """Our packed + chunked logprobs against the full-logits forward of each sequence alone."""
    tr = PolicyTrainer(model, TrainerSettings(device="cuda", dtype="bfloat16", micro_batch_tokens=4096))
    samples = make_samples([300, 517, 64], vocab, prompt_frac=0.25, seed=7)
    seqs = [SeqSpec(s.prompt_ids, s.response_ids) for s in samples]
    ours = tr.logprobs(seqs)
    tr.budget = 1  # one sequence per micro-batch: what packing must reproduce
    alone = tr.logprobs(seqs)
    pack_err = max(float((a - b).abs().max()) for a, b in zip(ours, alone, strict=True))
    errs, means = [], []
    with torch.no_grad(), torch.autocast("cuda", dtype=torch.bfloat16):
        for s, lp in zip(seqs, ours, strict=True):
            ids = torch.tensor([list(s.prompt_ids) + list(s.response_ids)], device="cuda")
            decoder, head = parts(model)
            h = decoder(input_ids=ids).last_hidden_state[0, len(s.prompt_ids) - 1 : -1]
            ref = full_logprobs(h, head, ids[0, len(s.prompt_ids) :]).cpu()
            errs.append(float((ref - lp).abs().max()))
            means.append(float((ref - lp).abs().mean()))
    return {
        "name": "correctness: packed+chunked vs per-sequence full logits (bf16)",
        "max_abs_logprob_err": max(errs),
        "mean_abs_logprob_err": statistics.mean(means),
        "packed_vs_alone_max_err": pack_err,
    }


def run_part(args) -> None:
    from treegrpo_learner._attention import _varlen

    env = {
        "name": "env",
        "torch": torch.__version__,
        "gpu": torch.cuda.get_device_name(),
        "matmul_tflops": matmul_ceiling() / 1e12,
        "varlen_attn": bool(_varlen()),
    }
    try:
        import transformers

        env["transformers"] = transformers.__version__
        import fla  # noqa: F401

        env["fla"] = getattr(fla, "__version__", "yes")
    except Exception:
        env["fla"] = None
    RESULTS.append(env)
    log(json.dumps(env))
    model, n, cfg = build(args.part)
    vocab = cfg.vocab_size
    log(f"{args.part}: N = {n / 1e9:.3f} B parameters")
    RESULTS.append(
        {
            "name": "model",
            "part": args.part,
            "n_params": n,
            "trainable": sum(p.numel() for p in model.parameters() if p.requires_grad),
        }
    )
    try:
        RESULTS.append(check_correctness(model, vocab))
    except Exception as exc:
        RESULTS.append({"name": "correctness", "error": traceback.format_exc()[-1500:]})
        log(f"correctness check FAILED: {exc}")
    log(json.dumps(RESULTS[-1]))
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-6, fused=True)
    s16 = make_samples([2048] * 16, vocab)
    s8 = make_samples([8192] * 8, vocab)
    rng = random.Random(0)
    svar = make_samples([rng.randint(256, 4096) for _ in range(32)], vocab, seed=1)
    for budget in args.budgets:
        tr = PolicyTrainer(
            model, TrainerSettings(device="cuda", dtype="bfloat16", micro_batch_tokens=budget, lr=1e-6)
        )
        if "16x2048" in args.batches:
            record(
                f"{args.tag} ours 16x2048 budget={budget}",
                n,
                16 * 2048,
                lambda t=tr: t.step(s16),
                args.steps,
                {"batch": "16x2048", "budget": budget, "variant": "ours"},
            )
        if "8x8192" in args.batches:
            record(
                f"{args.tag} ours 8x8192 budget={budget}",
                n,
                8 * 8192,
                lambda t=tr: t.step(s8),
                args.steps,
                {"batch": "8x8192", "budget": budget, "variant": "ours"},
            )
    tr = PolicyTrainer(
        model, TrainerSettings(device="cuda", dtype="bfloat16", micro_batch_tokens=args.var_budget, lr=1e-6)
    )
    toks = sum(len(s.prompt_ids) + len(s.response_ids) for s in svar)
    if "var" in args.batches:
        record(
            f"{args.tag} ours 32 var-len 256..4096 packed",
            n,
            toks,
            lambda: tr.step(svar),
            args.steps,
            {
                "batch": "32xU(256,4096)",
                "variant": "ours",
                "padded_tokens": 32 * max(len(s.prompt_ids) + len(s.response_ids) for s in svar),
            },
        )
    if not args.skip_naive:
        model.get_base_model().gradient_checkpointing_enable(
            gradient_checkpointing_kwargs={"use_reentrant": False}
        )
        record(
            f"{args.tag} naive 16x2048 (mbs={args.naive_mbs}, ckpt)",
            n,
            16 * 2048,
            naive_step(model, s16, opt, args.naive_mbs),
            args.steps,
            {"batch": "16x2048", "variant": "naive"},
        )
        if "8x8192" in args.batches:
            record(
                f"{args.tag} naive 8x8192 (mbs=8, ckpt)",
                n,
                8 * 8192,
                naive_step(model, s8, opt, 8),
                1,
                {"batch": "8x8192", "variant": "naive"},
            )
        model.get_base_model().gradient_checkpointing_disable()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--part", choices=["qwen3", "qwen35"], default="qwen3")
    ap.add_argument("--tag", default="")
    ap.add_argument("--out", default="out/bench")
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--budgets", type=int, nargs="+", default=[8192, 16384])
    ap.add_argument("--naive-mbs", type=int, default=16)
    ap.add_argument("--skip-naive", action="store_true")
    ap.add_argument("--var-budget", type=int, default=8192)
    ap.add_argument("--batches", nargs="+", default=["16x2048", "8x8192", "var"])
    args = ap.parse_args()
    args.tag = args.tag or args.part
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    try:
        run_part(args)
    finally:
        path = out / f"learner_gpu_{args.tag}.json"
        path.write_text(
            json.dumps({"date": time.strftime("%Y-%m-%d"), "argv": sys.argv, "results": RESULTS}, indent=1)
        )
        log(f"wrote {path}")


if __name__ == "__main__":
    main()
