"""The policy loss per token: PPO-clip against the proximal policy, corrections of the
train/inference mismatch against the behaviour policy, an optional k3 KL to the reference, and the
aggregation weights.

Decoupled PPO (the proximal policy is the learner's current weights before the update, the
behaviour policy is whatever version sampled the tokens):

    r_t   = exp(logp_t - prox_t)                           # ratio_level "token"
    r_t   = exp(mean_{t in seq} (logp_t - prox_t))         # ratio_level "sequence" (GSPO)
    rho_t = exp(prox_t - behav_t)                          # train/inference ratio
    w_t   = min(rho_t, tis_cap)                            # TIS (tis_cap 0: w_t = 1)
    m_t   = [token_mask_low <= rho_t <= token_mask_high]   # IcePop token mask (0 bounds: off)
          * [seq_mask_low <= exp(mean_seq log rho) <= seq_mask_high]  # sequence gate (0: off)
    pg_t  = m_t * w_t * max(-A r_t, -A clip(r_t, 1 - eps_low, 1 + eps_high))
    kl_t  = exp(ref_t - logp_t) - (ref_t - logp_t) - 1     # k3, >= 0
    loss  = sum_t weight_t * (pg_t + beta kl_t)

With the sequence ratio the clip range is its own (GSPO's 3e-4 / 4e-4: a length-normalised ratio
moves far less than a token's). `weight_t` implements the aggregation over the whole step (all
micro-batches), so gradients accumulated micro-batch by micro-batch equal those of one big batch.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from treegrpo_learner._settings import LossSettings

__all__ = ["AGG_MODES", "LossSettings", "policy_loss", "quantiles", "token_weights"]

AGG_MODES = ("token-mean", "seq-mean-token-mean", "seq-mean-token-sum-norm")


def token_weights(response_lens: Sequence[int], mode: str, norm_tokens: int = 0) -> list[float]:
    """Per-sequence weight of each of its tokens, so that sum(weight * loss) is the aggregate
    (verl's `loss_agg_mode` names).

    token-mean: every token of the step counts 1 / (all tokens). seq-mean-token-mean: each
    sequence's token mean, averaged over sequences. seq-mean-token-sum-norm (Dr. GRPO): each
    sequence's token sum over a constant `norm_tokens` (0: the step's longest response), averaged
    over sequences, so a token's weight depends on neither its sequence's length nor the batch's."""
    total = sum(response_lens)
    n = sum(1 for n_ in response_lens if n_ > 0)
    if mode == "token-mean":
        return [1.0 / total if total else 0.0 for _ in response_lens]
    if mode == "seq-mean-token-mean":
        return [1.0 / (n * r) if r else 0.0 for r in response_lens]
    if mode == "seq-mean-token-sum-norm":
        norm = norm_tokens or max(response_lens, default=0)
        return [1.0 / (n * norm) if r else 0.0 for r in response_lens]
    raise ValueError(f"unknown loss_agg_mode {mode!r}; one of {AGG_MODES}")


def _seq_mean(x: torch.Tensor, lens: Sequence[int]) -> torch.Tensor:
    """Each sequence's mean of `x`, repeated over that sequence's tokens (differentiable)."""
    parts = torch.split(x, list(lens))
    return torch.cat([p.mean().expand(len(p)) for p in parts if len(p)]) if len(x) else x


def _in(x: torch.Tensor, low: float, high: float) -> torch.Tensor:
    return ((x >= low) & (x <= high)).float()


def policy_loss(
    logp: torch.Tensor,
    prox: torch.Tensor,
    behav: torch.Tensor,
    adv: torch.Tensor,
    weight: torch.Tensor,
    s: LossSettings,
    ref: torch.Tensor | None = None,
    lens: Sequence[int] | None = None,
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """Sum of weighted per-token losses (a scalar) and per-token statistics (detached).

    `lens`: the response length of each sequence, in order (one sequence when None)."""
    lens = [len(logp)] if lens is None else list(lens)
    log_ratio = logp - prox
    if s.ratio_level == "sequence":
        log_ratio = _seq_mean(log_ratio, lens)
        low, high = s.seq_clip_low, s.seq_clip_high
    else:
        low, high = s.clip_low, s.clip_high
    ratio = torch.exp(log_ratio)
    pg1 = -adv * ratio
    pg2 = -adv * torch.clamp(ratio, 1.0 - low, 1.0 + high)
    pg = torch.maximum(pg1, pg2)
    stats = {
        "clipped": (pg2 > pg1).float().detach(),
        "ratio": ratio.detach(),
        "approx_kl": (0.5 * (logp - prox).detach() ** 2),
    }
    log_rho = (prox - behav).detach()
    rho = torch.exp(log_rho)
    stats["rollout_ratio"] = rho
    if s.tis_cap > 0:
        w = rho.clamp(max=s.tis_cap)
        pg = pg * w
        stats["tis_weight"] = w
    mask = torch.ones_like(rho)
    if s.token_mask_high > 0:
        mask = mask * _in(rho, s.token_mask_low, s.token_mask_high)
        stats["tokens_masked"] = 1.0 - mask
    if s.seq_mask_high > 0:
        gate = _in(torch.exp(_seq_mean(log_rho, lens)), s.seq_mask_low, s.seq_mask_high)
        mask = mask * gate
        stats["seq_gate_masked"] = 1.0 - gate  # per token: the token's sequence was gated off
    if s.token_mask_high > 0 or s.seq_mask_high > 0:
        pg = pg * mask
    per_token = pg
    if ref is not None and s.kl_coef > 0:
        d = ref - logp
        kl = torch.exp(d) - d - 1.0
        per_token = per_token + s.kl_coef * kl
        stats["kl_ref"] = kl.detach()
    return (weight * per_token).sum(), stats


def quantiles(x: torch.Tensor) -> dict[str, float]:
    """p01, p50, p99 of a tensor of ratios (empty: nothing)."""
    if x.numel() == 0:
        return {}
    q = torch.quantile(x.float(), torch.tensor([0.01, 0.5, 0.99], dtype=torch.float32, device=x.device))
    return {"p01": float(q[0]), "p50": float(q[1]), "p99": float(q[2])}


def micro_metrics(
    stats: dict[str, torch.Tensor], entropy: torch.Tensor, mismatch: torch.Tensor, response_lens: list[int]
) -> dict[str, float]:
    """One micro-batch's step metrics from `policy_loss`'s per-token stats: means, the clip share,
    the train/inference ratio's quantiles (averaged over the step's micro-batches, one in the demo),
    the share of sequences the gate masked, entropy and |proximal - behaviour|."""
    rho = stats.pop("rollout_ratio")
    gated = stats.pop("seq_gate_masked", None)
    out = {k: float(v.mean()) for k, v in stats.items()}
    out["clipfrac"] = out.pop("clipped")
    out.update({f"rollout_ratio_{k}": v for k, v in quantiles(rho).items()})
    if gated is not None:
        firsts = [part[0] for part in torch.split(gated, response_lens) if len(part)]
        out["sequences_masked"] = float(torch.stack(firsts).mean()) if firsts else 0.0
    out["entropy"] = float(entropy.mean())
    out["behaviour_mismatch"] = float(mismatch.abs().mean())
    return out
