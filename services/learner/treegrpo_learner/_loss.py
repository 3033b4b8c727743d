"""The policy loss per token: PPO-clip against the proximal policy, truncated importance weights
against the behaviour policy, an optional k3 KL to the reference, and the aggregation weights.

Decoupled PPO (the proximal policy is the learner's current weights before the update, the
behaviour policy is whatever version sampled the tokens):

    r_t   = exp(logp_t - prox_t)                           # trust region around the proximal policy
    w_t   = min(exp(prox_t - behav_t), tis_cap)            # corrects for stale / mismatched sampling
    pg_t  = w_t * max(-A r_t, -A clip(r_t, 1 - eps_low, 1 + eps_high))
    kl_t  = exp(ref_t - logp_t) - (ref_t - logp_t) - 1     # k3, >= 0
    loss  = sum_t weight_t * (pg_t + beta kl_t)

`weight_t` implements the aggregation over the whole step (all micro-batches), so gradients
accumulated micro-batch by micro-batch equal those of one big batch.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class LossSettings:
    clip_low: float = 0.2
    clip_high: float = 0.28
    tis_cap: float = 2.0  # 0 disables the importance weights
    kl_coef: float = 0.0


def token_weights(response_lens: Sequence[int], aggregation: str) -> list[float]:
    """Per-sequence weight of each of its tokens, so that sum(weight * loss) is the aggregate.

    token-mean: every token of the step counts 1 / (all tokens). seq-mean: each sequence's token
    mean, averaged over sequences."""
    total = sum(response_lens)
    if aggregation == "token-mean":
        return [1.0 / total if total else 0.0 for _ in response_lens]
    if aggregation == "seq-mean":
        n = sum(1 for n_ in response_lens if n_ > 0)
        return [1.0 / (n * r) if r else 0.0 for r in response_lens]
    raise ValueError(f"unknown aggregation {aggregation!r}")


def policy_loss(
    logp: torch.Tensor,
    prox: torch.Tensor,
    behav: torch.Tensor,
    adv: torch.Tensor,
    weight: torch.Tensor,
    s: LossSettings,
    ref: torch.Tensor | None = None,
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """Sum of weighted per-token losses (a scalar) and per-token statistics (detached)."""
    log_ratio = logp - prox
    ratio = torch.exp(log_ratio)
    pg1 = -adv * ratio
    pg2 = -adv * torch.clamp(ratio, 1.0 - s.clip_low, 1.0 + s.clip_high)
    pg = torch.maximum(pg1, pg2)
    stats = {
        "clipped": (pg2 > pg1).float().detach(),
        "ratio": ratio.detach(),
        "approx_kl": (0.5 * log_ratio.detach() ** 2),
    }
    if s.tis_cap > 0:
        w = torch.exp(prox - behav).clamp(max=s.tis_cap).detach()
        pg = pg * w
        stats["tis_weight"] = w
    per_token = pg
    if ref is not None and s.kl_coef > 0:
        d = ref - logp
        kl = torch.exp(d) - d - 1.0
        per_token = per_token + s.kl_coef * kl
        stats["kl_ref"] = kl.detach()
    return (weight * per_token).sum(), stats
