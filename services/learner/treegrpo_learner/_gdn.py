"""Gated DeltaNet (the linear-attention layers of Qwen3.5 / Qwen3.6) over a packed row of segments.

`install(model, backend)` replaces the `forward` of every `Qwen3_5GatedDeltaNet` of one model
(the instances, not the class: a generating sampler in the same process keeps transformers' own).
The replacement computes the same function as transformers' layer, segment by segment:
- the 4-tap short convolution runs once over a gathered row in which each segment is preceded by
  the inputs its first tokens may see (zeros for a root, the end of its prompt for a child);
- the recurrence runs over the roots first, then over the children, each child starting from its
  root's final state (`initial_state`), so a group's prompt is computed once.

Backends for the recurrence (`chunk_gated_delta_rule`):
- `fla`: flash-linear-attention's Triton kernels, varlen by `cu_seqlens` (needs Triton >= 3.7.1
  on Hopper: fla refuses older ones, whose gated backward is wrong there);
- `torch`: transformers' reference `torch_chunk_gated_delta_rule`, called through
  `inspect.unwrap` so that it is the reference even when fla is importable (transformers binds
  its name to fla's kernel at import time then). Segments are zero-padded into one batch (zero
  keys, values, gates and betas leave the state unchanged, so outputs and final states are
  exact), and the call is checkpointed: its float32 intermediates are recomputed in backward
  instead of being kept for every layer.
"""

from __future__ import annotations

import inspect
import types

import torch
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint

BACKENDS = ("auto", "fla", "torch")


def fla_available() -> bool:
    try:
        from fla.ops.gated_delta_rule import chunk_gated_delta_rule  # noqa: F401

        return True
    except Exception:  # an import error, or a Triton without a usable GPU
        return False


def resolve(backend: str, device: torch.device) -> str:
    if backend not in BACKENDS:
        raise ValueError(f"gdn backend must be one of {BACKENDS}, not {backend!r}")
    if backend == "auto":
        return "fla" if device.type == "cuda" and fla_available() else "torch"
    if backend == "fla" and not fla_available():
        raise RuntimeError("gdn backend 'fla' asked for, but flash-linear-attention does not import")
    return backend


def install(model: torch.nn.Module, backend: str = "auto") -> str | None:
    """Route this model's Gated DeltaNet layers through `forward`; the backend used, or None."""
    layers = [m for m in model.modules() if type(m).__name__ == "Qwen3_5GatedDeltaNet"]
    if not layers:
        return None
    device = next(model.parameters()).device
    chosen = resolve(backend, device)
    for m in layers:
        if not hasattr(m, "_tg_original"):
            m._tg_original = m.forward
        m.forward = types.MethodType(forward, m)
        m._tg_backend = chosen
    return chosen


def _reference():
    from transformers.models.qwen3_5 import modeling_qwen3_5 as mq

    return inspect.unwrap(mq.torch_chunk_gated_delta_rule)


def _run_fla(q, k, v, g, beta, cu, h0, final: bool):
    from fla.ops.gated_delta_rule import chunk_gated_delta_rule

    extra = {} if cu is None else {"cu_seqlens": cu[0], "cu_seqlens_cpu": torch.tensor(cu[1])}
    return chunk_gated_delta_rule(
        q,
        k,
        v,
        g=g,
        beta=beta,
        initial_state=h0,
        output_final_state=final,
        use_qk_l2norm_in_kernel=True,
        **extra,
    )


def _pad_index(layout, part: str, cu_host: list[int]) -> tuple[torch.Tensor, torch.Tensor, int]:
    """(gather into [N * Tmax] with index T as the zero slot, each token's place in it, Tmax)."""
    lens = [e - s for s, e in zip(cu_host[:-1], cu_host[1:], strict=True)]
    width = max(lens)

    def make():
        gather, keep = [], []
        for j, (s, n) in enumerate(zip(cu_host[:-1], lens, strict=True)):
            gather.extend(range(s, s + n))
            gather.extend([cu_host[-1]] * (width - n))
            keep.extend(range(j * width, j * width + n))
        dev = layout.device
        return torch.tensor(gather, device=dev), torch.tensor(keep, device=dev)

    gather, keep = layout.cached(f"pad_{part}", make)
    return gather, keep, width


def _run_torch(q, k, v, g, beta, cu, h0, final: bool, layout=None, part: str = ""):
    rep = v.shape[2] // q.shape[2]
    if rep > 1:  # the reference wants as many query/key heads as value heads (transformers repeats)
        q, k = q.repeat_interleave(rep, 2), k.repeat_interleave(rep, 2)
    xs = (q, k, v, g, beta)
    if cu is not None:
        gather, keep, width = _pad_index(layout, part, cu[1])
        xs = tuple(
            torch.cat([x[0], x.new_zeros(1, *x.shape[2:])]).index_select(0, gather).unflatten(0, (-1, width))
            for x in xs
        )

    def run(q, k, v, g, beta, h0):
        return _reference()(
            q, k, v, g=g, beta=beta, initial_state=h0, output_final_state=final, use_qk_l2norm_in_kernel=True
        )

    o, ht = checkpoint(run, *xs, h0, use_reentrant=False) if torch.is_grad_enabled() else run(*xs, h0)
    if cu is not None:
        o = o.flatten(0, 1).index_select(0, keep).unsqueeze(0)
    return o, ht


def _core(q, k, v, g, beta, layout, backend: str) -> torch.Tensor:
    """The recurrence over roots, then over children from their roots' final states."""

    def run(xs, part: str, h0, final: bool):
        cu = None if part == "" else layout.cu(part)
        if backend == "fla":
            return _run_fla(*xs, cu, h0, final)
        return _run_torch(*xs, cu, h0, final, layout, part)

    xs = (q, k, v, g, beta)
    if layout is None:  # [B, T]: each row is one sequence
        return run(xs, "", None, False)[0]
    if not layout.has_children:
        return run(xs, "roots", None, False)[0]
    n = layout.root_tokens
    roots, children = zip(*(x.split([n, x.shape[1] - n], dim=1) for x in xs), strict=True)
    o_roots, states = run(roots, "roots", None, True)
    h0 = states.index_select(0, layout.tensor("parents", layout.parents))  # backward sums the uses
    o_children, _ = run(children, "children", h0, False)
    return torch.cat([o_roots, o_children], dim=1)


def _short_conv(x: torch.Tensor, conv: torch.nn.Conv1d, layout, activation: str) -> torch.Tensor:
    """Depthwise causal convolution of x [B, T, C] per segment -> [B, T, C]."""
    from transformers.activations import ACT2FN

    width, channels = conv.weight.shape[-1], x.shape[-1]
    if layout is None:
        y = F.conv1d(
            x.transpose(1, 2).to(conv.weight.dtype),
            conv.weight,
            conv.bias,
            padding=width - 1,
            groups=channels,
        )
        y = y[..., : x.shape[1]].transpose(1, 2)
    else:
        gather, keep = layout.conv_index(width)
        rows = torch.cat([x[0], x.new_zeros(1, channels)]).index_select(0, gather)
        y = F.conv1d(rows.t().unsqueeze(0).to(conv.weight.dtype), conv.weight, conv.bias, groups=channels)
        y = y[0].index_select(1, keep).t().unsqueeze(0)
    return ACT2FN[activation](y).to(x.dtype)


def forward(self, hidden_states, cache_params=None, attention_mask=None, tg_layout=None, **kwargs):
    """Qwen3_5GatedDeltaNet.forward for training and scoring (no cache, no padding mask)."""
    if cache_params is not None or attention_mask is not None:  # generation: transformers' own
        return self._tg_original(
            hidden_states, cache_params=cache_params, attention_mask=attention_mask, **kwargs
        )
    b, t, _ = hidden_states.shape
    qkv = _short_conv(self.in_proj_qkv(hidden_states), self.conv1d, tg_layout, self.activation)
    q, k, v = torch.split(qkv, [self.key_dim, self.key_dim, self.value_dim], dim=-1)
    q = q.reshape(b, t, -1, self.head_k_dim)
    k = k.reshape(b, t, -1, self.head_k_dim)
    v = v.reshape(b, t, -1, self.head_v_dim)
    beta = self.in_proj_b(hidden_states).sigmoid()
    # float32 as in transformers: in half precision exp(A_log) * softplus(.) can overflow
    g = -self.A_log.float().exp() * F.softplus(self.in_proj_a(hidden_states).float() + self.dt_bias)
    out = _core(q, k, v, g, beta, tg_layout, self._tg_backend)
    z = self.in_proj_z(hidden_states)
    out = self.norm(out.reshape(-1, self.head_v_dim), z.reshape(-1, self.head_v_dim))
    return self.out_proj(out.reshape(b, t, -1))
