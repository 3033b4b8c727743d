"""The sampler's check of a pushed adapter for NaN and inf (`treegrpo.finite.nonfinite_in_folder`,
its `checked` stage) against the check it replaced, in the same process on the same files:

    python benchmarks/finite_check.py [--repeats 7] [--json out.json]

before  each file loaded (`safetensors.torch.load_file`: every tensor copied) and each tensor
        counted with `torch.isfinite` (the code up to 2026-12-07)
after   the file's header read, its data mapped, its exponent bits tested with numpy

Files: bf16 LoRA r32 adapters with the seed presets' tensor counts and sizes (Qwen3.5-9B: 496
tensors, 173 MB; Qwen3.6-27B: 992 tensors, 467 MB: the 12 targets on a 3:1 mix of Gated DeltaNet
and attention layers), random values and one NaN in the last tensor, so both must read every byte
and agree on the count. The file is read once before timing (in the page cache, as a just-unpacked
adapter is); the two arms alternate within each repeat.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

SHAPES = {"qwen35-9b": (32, 4096, 173_000_000), "qwen36-27b": (64, 5120, 467_000_000)}
ATTENTION = ["self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj"]
DELTANET = [f"linear_attn.{m}" for m in ("in_proj_qkv", "in_proj_z", "in_proj_b", "in_proj_a", "out_proj")]
MLP = ["mlp.gate_proj", "mlp.up_proj", "mlp.down_proj"]


def make_adapter(folder: Path, layers: int, hidden: int, total_bytes: int) -> int:
    """A LoRA r32 bf16 safetensors file of about `total_bytes`; returns its tensor count."""
    import torch
    from safetensors.torch import save_file

    modules = [
        f"base_model.model.model.layers.{i}.{m}"
        for i in range(layers)
        for m in (ATTENTION if i % 4 == 3 else DELTANET) + MLP
    ]
    out_dim = max(16, total_bytes // 2 // len(modules) // 32 - hidden)
    gen = torch.Generator().manual_seed(0)
    tensors = {}
    for name in modules:
        tensors[f"{name}.lora_A.weight"] = torch.randn(32, hidden, generator=gen).to(torch.bfloat16)
        tensors[f"{name}.lora_B.weight"] = torch.randn(out_dim, 32, generator=gen).to(torch.bfloat16)
    tensors[f"{modules[-1]}.lora_B.weight"][-1, -1] = float("nan")
    folder.mkdir(parents=True, exist_ok=True)
    save_file(tensors, str(folder / "adapter_model.safetensors"), metadata={"format": "pt"})
    return len(tensors)


def before(folder: Path) -> dict[str, int]:
    """The replaced check, as it was."""
    import torch
    from safetensors.torch import load_file

    bad = {}
    for path in sorted(folder.rglob("*.safetensors")):
        tensors = load_file(str(path)).values()
        n = int(sum((~torch.isfinite(t)).sum().item() for t in tensors if t.is_floating_point()))
        if n:
            bad[path.name] = n
    return bad


def write_record(rows: list[dict], path: str) -> None:
    """The rows with the date and the machine, as JSON at `path` (nothing where it is empty)."""
    record = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "machine": platform.node()}
    if path:
        Path(path).write_text(json.dumps(record | {"rows": rows}, indent=1))


def timed(check, folder: Path) -> tuple[float, dict]:
    started = time.perf_counter()
    found = check(folder)
    return time.perf_counter() - started, found


def main() -> None:
    from treegrpo.finite import nonfinite_in_folder

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--json", default="")
    a = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for shape, (layers, hidden, size) in SHAPES.items():
            folder = Path(tmp) / shape
            count = make_adapter(folder, layers, hidden, size)
            mb = (folder / "adapter_model.safetensors").stat().st_size / 1e6
            (folder / "adapter_model.safetensors").read_bytes()  # into the page cache
            arms: dict[str, list[float]] = {"before": [], "after": []}
            for _ in range(a.repeats):
                for arm, check in (("before", before), ("after", nonfinite_in_folder)):
                    seconds, found = timed(check, folder)
                    if found != {"adapter_model.safetensors": 1}:
                        raise SystemExit(f"{arm} found {found} in {shape}, expected one NaN")
                    arms[arm].append(seconds)
            row = {"shape": shape, "tensors": count, "mb": round(mb, 1)}
            row |= {f"{arm}_s": round(statistics.median(s), 4) for arm, s in arms.items()}
            row["ratio"] = round(row["after_s"] / row["before_s"], 3)
            row["runs"] = {arm: [round(x, 4) for x in s] for arm, s in arms.items()}
            rows.append(row)
            print(json.dumps({k: v for k, v in row.items() if k != "runs"}), flush=True)
    write_record(rows, a.json)


if __name__ == "__main__":
    main()
