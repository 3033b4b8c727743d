"""Phases of benchmarks/sampler_vllm_gpu.py: bound, swaps, agreement, Qwen3.5, plot."""

from __future__ import annotations

import asyncio
import io
import platform
import statistics
import subprocess
import tarfile
from pathlib import Path

from benchmarks import _vllm_gpu_models as M
from treegrpo.events import Kind


def machine() -> dict:
    import torch

    info = {"host": platform.node(), "torch": torch.__version__, "cpus": __import__("os").cpu_count()}
    try:
        import vllm

        info["vllm"] = vllm.__version__
    except ImportError:
        pass
    if torch.cuda.is_available():
        info["gpu"] = torch.cuda.get_device_name(0)
        smi = subprocess.run(
            ["nvidia-smi", "--query-gpu=driver_version,clocks.max.sm,memory.total", "--format=csv,noheader"],
            capture_output=True,
            text=True,
        )
        info["nvidia_smi"] = smi.stdout.strip()
    return info


def hbm_bandwidth(device: str) -> float | None:
    """Device-to-device copy, bytes read + written per second (METHOD.md's ceiling)."""
    import torch

    if device != "cuda":
        return None
    x = torch.randn(1 << 30, device="cuda", dtype=torch.bfloat16)
    y = torch.empty_like(x)
    for _ in range(3):
        y.copy_(x)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for _ in range(10):
        start.record()
        y.copy_(x)
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / 1000)
    bw = 2 * x.numel() * 2 / statistics.median(times)
    del x, y
    torch.cuda.empty_cache()
    return bw


def decode_bound(
    shape: M.Shape, hbm: float | None, batch: int, prompt: int, tokens: list[int], rank: int
) -> dict:
    """Tokens/s if each decode step only read the weights (the issue's bound), and weights + LoRA +
    every sequence's KV cache at the mean context (each sibling reads the shared prompt's blocks)."""
    hbm = hbm or 4.8e12
    weights = shape.params() * 2
    per_layer = (
        shape.hidden * 2
        + shape.heads * shape.head_dim
        + shape.kv_heads * shape.head_dim * 2
        + shape.heads * shape.head_dim
        + shape.hidden
        + 3 * (shape.hidden + shape.intermediate)
    )
    lora = rank * per_layer * shape.layers * 2
    out = {
        "hbm_bytes_per_s": hbm,
        "weights_gb": weights / 1e9,
        "lora_gb": lora / 1e9,
        "weights_only_tok_s": round(hbm / weights * batch),
    }
    for t in tokens:
        kv = batch * (prompt + t / 2) * shape.kv_bytes_per_token()
        out[f"with_kv_{t}_tok_s"] = round(hbm / (weights + lora + kv) * batch)
        out[f"kv_gb_per_step_{t}"] = round(kv / 1e9, 1)
    return out


def fresh(prompts: list, salt: int = 1) -> list:
    """The same prompts with a distinct first line: no prefix-cache hits from an earlier run."""
    return [
        [m if m["role"] != "user" else {**m, "content": f"[run {salt}]\n{m['content']}"} for m in p]
        for p in prompts
    ]


def vllm_backend(a, model_dir: Path):
    from treegrpo_sampler.backends._vllm import VllmBackend
    from treegrpo_sampler.config import VllmSettings

    settings = VllmSettings(
        dtype=a.dtype,
        max_model_len=a.prompt_tokens + max(a.tokens) + 256,
        gpu_memory_utilization=a.gpu_memory_utilization,
        cpu_kvcache_gib=2,
        max_lora_rank=a.rank,
        max_num_seqs=max(64, a.groups * a.group),
        enforce_eager=a.small,
    )
    return VllmBackend(model_dir, settings)


def adapter_tar(folder: Path, path: Path):
    """The folder as the learner's archive (its tar, hashed as written): `Archive`."""
    import hashlib

    from treegrpo_learner._archive import Archive

    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for f in sorted(folder.iterdir()):
            tar.add(f, arcname=f.name)
    data = buf.getvalue()  # one copy: getvalue() copies the buffer each call (467 MB at the 27B)
    path.write_bytes(data)
    return Archive(path, hashlib.sha256(data).hexdigest(), len(data))


async def swap_phase(
    rec, backend, adapters: list[Path], work: Path, prompt, swaps: int, spools: list[Path] | None = None
) -> list:
    """Versions 2.. delivered by the learner's own `Publisher.publish` (upload and push at once,
    then the confirmation): `update_weights_s` is that call, as a step's update_weights phase;
    published -> loaded from the bus's own timestamps, and the sampler's seconds per stage; the
    first group after each swap kept for the proof that it came from the new adapter. `spools`:
    where the sampler spools and unpacks, taken in turn (interleaved arms; default `work/spool`)."""
    from treegrpo.bus import Bus
    from treegrpo.embedded import EmbeddedNats
    from treegrpo_learner._publish import Publisher
    from treegrpo_sampler import AdapterLoader, SamplingParams, VersionGate, WeightReceiver

    nats = EmbeddedNats(work / "nats").start()
    bus = await Bus.connect(nats.url, "bench/sampler", timeout_s=10)
    await bus.ensure()
    spools = spools or [work / "spool"]
    loader = AdapterLoader(backend, bus, VersionGate(), "bench", spools[0], "sampler/bench")
    receiver = WeightReceiver(loader, port=0, max_bytes=4 << 30, spool_dir=spools[0])
    address = await receiver.start()
    publisher = Publisher(bus, "learner/bench", [address], 1, 600.0, 600.0, 2)
    rows, proof = [], []
    try:
        for version in range(2, 2 + swaps):
            folder = adapters[(version - 1) % len(adapters)]
            spool = spools[(version - 2) % len(spools)]
            spool.mkdir(parents=True, exist_ok=True)
            loader.workdir, receiver.spool_dir = spool, spool
            archive = await asyncio.to_thread(adapter_tar, folder, work / f"push-v{version}.tar")
            t0 = asyncio.get_running_loop().time()
            metrics = await publisher.publish("bench", version, archive, "bench")
            update_weights_s = asyncio.get_running_loop().time() - t0
            published = await bus.last_event("bench", Kind.POLICY_PUBLISHED, (str(version),))
            loaded = await bus.last_event("bench", Kind.POLICY_LOADED, (str(version), "bench"))
            if not metrics.get("push_confirmed") or loaded is None or published is None:
                raise RuntimeError(f"v{version} not loaded: {metrics}")
            comps = await backend.generate(prompt, 4, SamplingParams(max_new_tokens=128, seed=version))
            rows.append(
                {
                    "version": version,
                    "archive_mb": round(archive.bytes / 1e6, 1),
                    "update_weights_s": round(update_weights_s, 3),
                    "upload_s": round(metrics["upload_s"], 3),
                    "published_to_loaded_s": round(loaded.envelope.time - published.envelope.time, 3),
                    "loader_swap_s": round(loaded.policy_loaded.load_seconds, 3),
                    "backend_add_lora_s": round(backend.last_swap_seconds, 3),
                    "spool": str(spool),
                    "received_s": round(receiver.last_received_s, 3),
                    "stages_s": {k: round(v, 3) for k, v in loader.last_stages.items()},
                    "serving": getattr(backend, "lora_name", None),
                }
            )
            proof.append({"version": version, "adapter": (version - 1) % len(adapters), "completions": comps})
        rec["swaps"] = {"rows": rows} | {
            f"{spool}": {
                key: statistics.median(r[key] for r in rows if r["spool"] == str(spool))
                for key in ("published_to_loaded_s", "update_weights_s", "received_s")
            }
            for spool in spools
        }
        for key in ("published_to_loaded_s", "update_weights_s"):
            rec["swaps"][f"{key}_median"] = statistics.median(r[key] for r in rows)
    finally:
        await receiver.stop(0)
        await bus.close(2)
        nats.stop()
    return proof


def learner(a, model_dir: Path, adapters: list[Path]):
    """The learner's own model and recomputation path, bf16 like its training run."""
    from treegrpo_learner._model import load_base, wrap_lora
    from treegrpo_learner._trainer import PolicyTrainer, TrainerSettings

    base = load_base(model_dir, a.dtype, a.device)
    model = wrap_lora(base, None, adapter_dir=adapters[0])
    for i, folder in enumerate(adapters[1:], start=1):
        model.load_adapter(str(folder), adapter_name=f"a{i}", is_trainable=False)
    import torch

    for name, p in model.named_parameters():  # every adapter in float32, as wrap_lora keeps the trained one
        if "lora_" in name and p.dtype != torch.float32:
            p.data = p.data.float()
    return model, PolicyTrainer(model, TrainerSettings(device=a.device, dtype=a.dtype))


def compare(trainer, completions, adapter_name: str | None) -> tuple[list[float], list[float]]:
    """(learner - vLLM) per token, and the raw importance ratios exp(learner - vLLM); the learner
    under `adapter_name`, or its base alone (the adapter disabled) with None."""
    import torch

    from treegrpo_learner._packing import SeqSpec

    seqs = [SeqSpec(tuple(c.prompt_token_ids), tuple(c.token_ids)) for c in completions]
    if adapter_name is None:
        with trainer.model.disable_adapter():
            ours = trainer.logprobs(seqs)
    else:
        trainer.model.set_adapter(adapter_name)
        ours = trainer.logprobs(seqs)
    deltas = torch.cat([o - torch.tensor(c.logprobs) for o, c in zip(ours, completions, strict=True)])
    return deltas.tolist(), deltas.exp().tolist()


def quantiles(xs: list[float]) -> dict:
    import numpy as np

    v = np.asarray(xs)
    return {
        "n": int(v.size),
        "mean": float(v.mean()),
        "p50": float(np.quantile(v, 0.5)),
        "p90": float(np.quantile(v, 0.9)),
        "p99": float(np.quantile(v, 0.99)),
        "max": float(v.max()),
    }


def agreement_stats(deltas: list[float], ratios: list[float], comps) -> dict:
    """|learner - vLLM| per token and the importance ratios it makes (TIS cap 2), summarised."""
    import numpy as np

    r = np.asarray(ratios)
    return {
        "tokens": len(deltas),
        "abs_delta": quantiles(np.abs(deltas).tolist()),
        "mean_signed_delta": float(np.mean(deltas)),
        "mean_sampled_logprob": float(np.concatenate([np.asarray(c.logprobs) for c in comps]).mean()),
        "tis_raw_ratio": quantiles(r.tolist()),
        "tis_ratio_p1": float(np.quantile(r, 0.01)),
        "share_capped_at_2": float((r > 2.0).mean()),
        "share_below_0.5": float((r < 0.5).mean()),
        "tis_weight_mean_capped": float(np.minimum(r, 2.0).mean()),
    }


async def agreement_phase(a, rec, model_dir: Path, adapters: list[Path], sampled, proof) -> None:
    def run() -> None:
        import numpy as np

        model, trainer = learner(a, model_dir, adapters)
        names = ["default"] + [f"a{i}" for i in range(1, len(adapters))]
        comps = [c for group in sampled for c in group]
        rec["agreement"] = agreement_stats(*compare(trainer, comps, names[0]), comps)
        rows = []
        for p in proof or []:
            served, other = names[p["adapter"]], names[1 - p["adapter"]]
            d_served, _ = compare(trainer, p["completions"], served)
            d_other, _ = compare(trainer, p["completions"], other)
            rows.append(
                {
                    "version": p["version"],
                    "mean_abs_delta_vs_new_adapter": float(np.abs(d_served).mean()),
                    "mean_abs_delta_vs_previous_adapter": float(np.abs(d_other).mean()),
                }
            )
        rec["swap_proof"] = rows
        M.free(model, trainer)

    await asyncio.to_thread(run)


async def qwen35_phase(a, rec, work: Path) -> None:
    """Adapter trained through AutoModelForCausalLM, served by vLLM's Qwen3_5ForConditionalGeneration."""
    from treegrpo_sampler import SamplingParams
    from treegrpo_sampler.backends._vllm import VllmBackend
    from treegrpo_sampler.config import VllmSettings

    model = await asyncio.to_thread(M.build_qwen35, work / "q35", a.device)
    adapter = await asyncio.to_thread(M.qwen35_causal_adapter, model, work / "q35-lora", a.device)
    settings = VllmSettings(
        dtype="bfloat16",
        max_model_len=1024,
        gpu_memory_utilization=0.15,
        max_lora_rank=16,
        enforce_eager=True,
        language_model_only=True,
        cpu_kvcache_gib=1,
        max_num_seqs=8,
        enable_prefix_caching=False,  # fewer mamba-state modes to set up and compile
        gdn_prefill_backend="triton" if a.device == "cuda" else "",
    )
    backend = VllmBackend(model, settings)
    msgs = [{"role": "user", "content": "Write a training script for tabular data."}]
    sp = SamplingParams(max_new_tokens=32, seed=5)
    try:
        base = await backend.generate(msgs, 4, sp)
        from vllm.lora.request import LoRARequest

        raw = LoRARequest("raw-causal-keys", 999, str(adapter))  # what vLLM gets without our renaming
        await backend._engine.add_lora(raw)
        backend._lora = raw
        unrenamed = await backend.generate(msgs, 4, sp)
        backend._lora = None
        await backend.load_adapter(1, adapter)  # renamed into <adapter>.vllm
        renamed = await backend.generate(msgs, 4, sp)
    finally:
        await backend.close()

    def ids(cs):
        return [c.token_ids for c in cs]

    rec["qwen35"] = {
        "unrenamed_equals_base": ids(unrenamed) == ids(base),
        "renamed_differs_from_base": ids(renamed) != ids(base),
        "renamed_folder": str(adapter) + ".vllm",
        "served": backend.lora_name,
    }


def plot(data: dict, path: Path) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    bars = {
        "hf, 1 group, LoRA": data.get("hf_lora_one_group", {}).get("tok_s"),
        "vllm base": data.get("vllm_base", {}).get("tok_s"),
    }
    for t in data["args"]["tokens"]:
        bars[f"vllm LoRA, {t} tok"] = data.get(f"vllm_lora_{t}", {}).get("tok_s")
    bars = {k: v for k, v in bars.items() if v}
    fig, ax = plt.subplots(figsize=(7, 3.2))
    ax.bar(list(bars), list(bars.values()), color="#2a7")
    bound = data.get("bound", {})
    ax.axhline(bound.get("weights_only_tok_s", 0), color="#c33", ls="--", label="bound: weights only")
    t = data["args"]["tokens"][0]
    ax.axhline(
        bound.get(f"with_kv_{t}_tok_s", 0), color="#c93", ls=":", label=f"bound: weights + KV ({t} tok)"
    )
    ax.set_ylabel("sampled tokens / s")
    ax.set_title(f"{data['machine'].get('gpu', 'cpu')}: 4 groups x G16, ~2k-token prompts", fontsize=9)
    ax.legend(fontsize=7)
    ax.tick_params(axis="x", labelsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
