"""`tg_packed`: causal attention over a packed row of segments, registered with transformers.

Models load with `attn_implementation="tg_packed"` and the learner passes the row's `Layout`
(`_layout.py`) through the forward kwargs as `tg_layout`; no mask function is registered, so
transformers builds no dense [T, T] mask. A root segment attends causally to itself; a child
segment (one sibling's response) attends to its root's prompt and causally to itself: its keys are
gathered as prompt + own tokens and the causal diagonal is aligned to the bottom right, so the
child's i-th token sees the whole prompt and its own first i tokens, as in `prompt + response`.

Kernels, fastest first: PyTorch's `varlen_attn` (flash varlen, CUDA, separate query and key
boundaries), else one `scaled_dot_product_attention` per segment (flash on CUDA, the math kernel
on CPU). Both are exact.
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


def _gathered(k: torch.Tensor, v: torch.Tensor, layout) -> tuple[torch.Tensor, torch.Tensor]:
    """k/v [T, Hkv, D] -> the keys of every segment laid out segment after segment."""
    index = layout.kv_index()
    if index is None:
        return k, v
    return k.index_select(0, index), v.index_select(0, index)  # backward sums the prompt's uses


def _per_segment(q, k, v, layout, scale: float | None) -> torch.Tensor:
    """q [1, H, T, D], k/v [1, Hkv, T, D] -> [1, T, H, D]; one SDPA per segment."""
    gqa = q.shape[1] != k.shape[1]
    kt, vt = _gathered(k[0].transpose(0, 1), v[0].transpose(0, 1), layout)
    # split, not slicing: a slice's backward writes a zero tensor of the whole row per segment
    klens = layout.key_lens()
    outs = []
    for qi, ki, vi in zip(q.split(layout.seg_lens, 2), kt.split(klens, 0), vt.split(klens, 0), strict=True):
        ki, vi = ki.transpose(0, 1)[None], vi.transpose(0, 1)[None]
        lq, lk = qi.shape[2], ki.shape[2]
        # bottom-right causal: query i sees keys up to lk - lq + i (SDPA's is_causal is top-left)
        mask = None if lq == lk else torch.ones(lq, lk, dtype=torch.bool, device=q.device).tril(lk - lq)
        outs.append(
            F.scaled_dot_product_attention(
                qi, ki, vi, attn_mask=mask, is_causal=mask is None, scale=scale, enable_gqa=gqa
            )
        )
    return torch.cat(outs, dim=2).transpose(1, 2)


def _flash_varlen(fn_info, q, k, v, layout, scale: float | None) -> torch.Tensor:
    fn, has_is_causal, has_gqa = fn_info
    qt, kt, vt = (x[0].transpose(0, 1) for x in (q, k, v))  # [T, H, D]
    kt, vt = _gathered(kt, vt, layout)
    if kt.shape[1] != qt.shape[1] and not has_gqa:
        rep = qt.shape[1] // kt.shape[1]
        kt, vt = kt.repeat_interleave(rep, 1), vt.repeat_interleave(rep, 1)
    kwargs = {"scale": scale}
    if has_is_causal:
        kwargs["is_causal"] = True  # flash aligns the causal diagonal bottom-right when lk > lq
    else:
        kwargs["window_size"] = (-1, 0)
    if has_gqa and kt.shape[1] != qt.shape[1]:
        kwargs["enable_gqa"] = True
    cu_q, cu_k = layout.cu32("all"), layout.cu32("keys")
    max_q, max_k = max(layout.seg_lens), max(layout.key_lens())
    out = fn(qt, kt, vt, cu_q, cu_k, max_q, max_k, **kwargs)
    return out.unsqueeze(0)  # [1, T, H, D]


def packed_attention(module, query, key, value, attention_mask=None, scaling=None, dropout=0.0, **kwargs):
    """transformers attention interface: returns ([B, T, H, D], None)."""
    layout = kwargs.get("tg_layout")
    if layout is None:  # an unpacked batch: plain causal attention per row
        gqa = query.shape[1] != key.shape[1]
        out = F.scaled_dot_product_attention(
            query, key, value, is_causal=query.shape[2] > 1, scale=scaling, enable_gqa=gqa
        )
        return out.transpose(1, 2), None
    if query.shape[0] != 1:
        raise ValueError("packed attention expects one row of packed segments")
    fn_info = _varlen() if query.is_cuda and query.dtype in (torch.bfloat16, torch.float16) else None
    if fn_info is not None:
        return _flash_varlen(fn_info, query, key, value, layout, scaling), None
    return _per_segment(query, key, value, layout, scaling), None


def register() -> str:
    """Make `attn_implementation="tg_packed"` available to transformers (idempotent)."""
    if not _state["registered"]:
        from transformers import AttentionInterface

        AttentionInterface.register(NAME, packed_attention)
        _state["registered"] = True
    return NAME
