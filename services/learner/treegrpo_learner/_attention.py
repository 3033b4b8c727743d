"""`tg_packed`: causal attention over packed sequences, registered with transformers.

Models load with `attn_implementation="tg_packed"` and the learner passes `cu_seq_lens_q` (and
`max_length_q`) through the forward kwargs, the names transformers' own varlen path uses, so the
Qwen3.5 linear-attention layers (flash-linear-attention's `chunk_gated_delta_rule`) see the same
boundaries. No mask function is registered, so transformers builds no dense [T, T] mask.

Kernels, fastest first: PyTorch's `varlen_attn` (flash varlen, CUDA), else one causal
`scaled_dot_product_attention` per sequence (flash on CUDA, the math kernel on CPU). Both are exact.
"""

from __future__ import annotations

import inspect

import torch
import torch.nn.functional as F

NAME = "tg_packed"
_state: dict[str, object] = {"registered": False, "varlen": None}


def _varlen():
    """PyTorch's varlen flash attention and how to ask it for causality, or None."""
    if _state["varlen"] is None:
        try:
            from torch.nn.attention.varlen import varlen_attn

            params = inspect.signature(varlen_attn).parameters
            _state["varlen"] = (varlen_attn, "is_causal" in params, "enable_gqa" in params)
        except (ImportError, AttributeError):
            _state["varlen"] = False
    return _state["varlen"] or None


def _per_sequence(q, k, v, cu: list[int], scale: float | None) -> torch.Tensor:
    """q [1, H, T, D], k/v [1, Hkv, T, D] -> [1, T, H, D]; one causal SDPA per sequence."""
    gqa = q.shape[1] != k.shape[1]
    # split, not slicing: a slice's backward writes a zero tensor of the whole row per sequence
    lens = [e - s for s, e in zip(cu[:-1], cu[1:], strict=True)]
    outs = [
        F.scaled_dot_product_attention(qi, ki, vi, is_causal=True, scale=scale, enable_gqa=gqa)
        for qi, ki, vi in zip(q.split(lens, 2), k.split(lens, 2), v.split(lens, 2), strict=True)
    ]
    return torch.cat(outs, dim=2).transpose(1, 2)


def _flash_varlen(fn_info, q, k, v, cu: torch.Tensor, max_len: int, scale: float | None) -> torch.Tensor:
    fn, has_is_causal, has_gqa = fn_info
    qt, kt, vt = (x[0].transpose(0, 1) for x in (q, k, v))  # [T, H, D]
    if kt.shape[1] != qt.shape[1] and not has_gqa:
        rep = qt.shape[1] // kt.shape[1]
        kt, vt = kt.repeat_interleave(rep, 1), vt.repeat_interleave(rep, 1)
    kwargs = {"scale": scale}
    if has_is_causal:
        kwargs["is_causal"] = True
    else:
        kwargs["window_size"] = (-1, 0)
    if has_gqa and kt.shape[1] != qt.shape[1]:
        kwargs["enable_gqa"] = True
    cu32 = cu.to(torch.int32)
    out = fn(qt, kt, vt, cu32, cu32, max_len, max_len, **kwargs)
    return out.unsqueeze(0)  # [1, T, H, D]


def packed_attention(module, query, key, value, attention_mask=None, scaling=None, dropout=0.0, **kwargs):
    """transformers attention interface: returns ([B, T, H, D], None)."""
    cu = kwargs.get("cu_seq_lens_q")
    if cu is None:  # an unpacked batch: plain causal attention per row
        gqa = query.shape[1] != key.shape[1]
        out = F.scaled_dot_product_attention(
            query, key, value, is_causal=query.shape[2] > 1, scale=scaling, enable_gqa=gqa
        )
        return out.transpose(1, 2), None
    if query.shape[0] != 1:
        raise ValueError("packed attention expects one row of packed sequences")
    fn_info = _varlen() if query.is_cuda and query.dtype in (torch.bfloat16, torch.float16) else None
    if fn_info is not None:
        max_len = int(kwargs.get("max_length_q") or int((cu[1:] - cu[:-1]).max()))
        return _flash_varlen(fn_info, query, key, value, cu, max_len, scaling), None
    return _per_sequence(query, key, value, cu.tolist(), scaling), None


def register() -> str:
    """Make `attn_implementation="tg_packed"` available to transformers (idempotent)."""
    if not _state["registered"]:
        from transformers import AttentionInterface

        AttentionInterface.register(NAME, packed_attention)
        _state["registered"] = True
    return NAME


# ---- linear-attention layers (Qwen3.5's Gated DeltaNet) ----------------------------------------
def _fla_available() -> bool:
    try:
        import fla  # noqa: F401

        return True
    except Exception:  # an import error or a missing GPU toolchain
        return False


def _conv_per_sequence(original):
    """Wrap transformers' causal_conv1d_fn so its 4-tap window never reaches into the previous
    packed sequence (the reference path convolves the whole row as one sequence)."""

    def conv(hidden_states, weight, bias=None, activation=None, **kwargs):
        cu = kwargs.get("cu_seq_lens_q")
        if cu is None or hidden_states.shape[0] != 1:
            return original(hidden_states, weight, bias, activation=activation)
        bounds = cu.tolist()
        parts_ = [
            original(hidden_states[:, :, s:e], weight, bias, activation=activation)
            for s, e in zip(bounds[:-1], bounds[1:], strict=True)
        ]
        return torch.cat(parts_, dim=-1)

    conv._tg_packed = True  # type: ignore[attr-defined]
    return conv


def packing_is_exact(model) -> bool:
    """Whether several sequences may share one packed row for this model.

    Softmax attention honours the boundaries through `tg_packed`. Linear-attention layers
    (Qwen3.5) need flash-linear-attention's varlen `chunk_gated_delta_rule` and a boundary-aware
    short convolution; without fla the reference recurrence would carry state across sequences,
    so the learner then packs one sequence per micro-batch instead."""
    cfg = getattr(model, "config", None)
    cfg = getattr(cfg, "text_config", None) or cfg
    if "linear_attention" not in (getattr(cfg, "layer_types", None) or []):
        return True
    if not _fla_available():
        return False
    from transformers.models.qwen3_5 import modeling_qwen3_5 as mq

    if not getattr(mq.causal_conv1d_fn, "_tg_packed", False):
        mq.causal_conv1d_fn = _conv_per_sequence(mq.causal_conv1d_fn)
    return True
