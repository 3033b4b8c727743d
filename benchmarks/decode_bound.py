"""The memory-bandwidth bound of decoding a hybrid model (Qwen3.5 / Qwen3.6: Gated DeltaNet layers
and every fourth layer full attention) at a given concurrency, and measured tok/s against it.

    python benchmarks/decode_bound.py --shape qwen35-9b --seqs 64 --prompt 2048 --new 1024 --measured 5917

One decode step of B sequences reads, at least once each:
    weights      every parameter except the input embedding (only B rows of it are read)
    KV           sum over sequences of context_len x 2 (K, V) x kv_heads x head_dim x kv_bytes,
                 for each full-attention layer (paged attention reads a shared prefix once per sequence)
    DeltaNet     per linear-attention layer and sequence, the recurrent state
                 (value_heads x key_dim x value_dim x state_bytes) read and written, and the
                 causal-conv state ((kernel - 1) x conv_dim x bytes) read and written
so  step_s >= bytes / HBM bandwidth  and  tok/s <= B / step_s. The context averages
prompt + new / 2 over a completion. Compute is far from binding at these batch sizes (2 N flops
per token: 64 x 2 x 9e9 = 1.2 PFLOP/s-ms, ~1.2 ms of an H200's 989 TFLOP/s against ~5 ms of bytes).
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass

H200_BYTES_S = 4.8e12  # HBM3e, NVIDIA's figure for the H200 SXM


@dataclass(frozen=True)
class Hybrid:
    hidden: int
    intermediate: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    lin_k_heads: int
    lin_v_heads: int
    lin_k_dim: int
    lin_v_dim: int
    conv_kernel: int
    vocab: int
    full_every: int = 4

    @property
    def full_layers(self) -> int:
        return self.layers // self.full_every

    @property
    def linear_layers(self) -> int:
        return self.layers - self.full_layers

    def params(self) -> int:
        """Parameters of the text model (embedding and untied head included)."""
        h, f = self.hidden, self.intermediate
        mlp = 3 * h * f
        attn = h * (self.heads * self.head_dim * 2) + 2 * h * self.kv_heads * self.head_dim  # q (+gate), k, v
        attn += self.heads * self.head_dim * h  # o
        key, val = self.lin_k_heads * self.lin_k_dim, self.lin_v_heads * self.lin_v_dim
        lin = h * (2 * key + val) + h * val + 2 * h * self.lin_v_heads + val * h  # qkv, z, b+a, out
        lin += (2 * key + val) * self.conv_kernel
        return self.full_layers * (attn + mlp) + self.linear_layers * (lin + mlp) + 2 * self.vocab * h


SHAPES = {
    "qwen35-9b": Hybrid(4096, 12288, 32, 16, 4, 256, 16, 32, 128, 128, 4, 248_320),
    "qwen36-27b": Hybrid(5120, 17408, 64, 24, 4, 256, 16, 48, 128, 128, 4, 248_320),
}


def step_bytes(m: Hybrid, seqs: int, context: float, weight_bytes=2, kv_bytes=2, state_bytes=2) -> dict:
    weights = (m.params() - m.vocab * m.hidden) * weight_bytes
    kv = seqs * context * 2 * m.kv_heads * m.head_dim * kv_bytes * m.full_layers
    state = m.lin_v_heads * m.lin_k_dim * m.lin_v_dim * state_bytes
    conv = (
        (m.conv_kernel - 1) * (2 * m.lin_k_heads * m.lin_k_dim + m.lin_v_heads * m.lin_v_dim) * weight_bytes
    )
    deltanet = 2 * seqs * m.linear_layers * (state + conv)  # read and written every step
    return {"weights": weights, "kv": kv, "deltanet": deltanet, "total": weights + kv + deltanet}


def bound(shape: str, seqs: int, prompt: int, new: int, kv_bytes: int, bandwidth: float) -> dict:
    m = SHAPES[shape]
    b = step_bytes(m, seqs, prompt + new / 2, kv_bytes=kv_bytes)
    step_s = b["total"] / bandwidth
    return {
        "shape": shape,
        "params": m.params(),
        "seqs": seqs,
        "bytes_per_step_gib": {k: v / 2**30 for k, v in b.items()},
        "step_ms": step_s * 1e3,
        "bound_tok_s": seqs / step_s,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shape", choices=sorted(SHAPES), default="qwen35-9b")
    ap.add_argument("--seqs", type=int, nargs="+", default=[64])
    ap.add_argument("--prompt", type=int, default=2048)
    ap.add_argument("--new", type=int, default=1024)
    ap.add_argument("--kv-bytes", type=int, default=2, help="2 = bf16 KV, 1 = fp8")
    ap.add_argument("--bandwidth", type=float, default=H200_BYTES_S, help="bytes/s")
    ap.add_argument("--measured", type=float, help="measured tok/s at the first --seqs, for its share")
    args = ap.parse_args()
    for k, seqs in enumerate(args.seqs):
        row = bound(args.shape, seqs, args.prompt, args.new, args.kv_bytes, args.bandwidth)
        if args.measured and k == 0:
            row["measured_tok_s"], row["share_of_bound"] = args.measured, args.measured / row["bound_tok_s"]
        print(json.dumps(row))


if __name__ == "__main__":
    main()
