"""The sections of LearnerConfig that say what a step trains with: the optimizer, the policy loss,
the rollout corrections, overlong responses, when a step happens, and the packing.

Each field's default is the one `treegrpo_learner._settings` declares (`STEP.<name>`): the trainer's
plain-dataclass settings and this config share one default per setting (tests/unit/test_learner_config.py).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from treegrpo.config import Section
from treegrpo_learner._settings import DEFAULTS as STEP


class PolicyLossSettings(Section):
    """How the PPO ratio is formed and the per-token losses are aggregated (docs/LEARNER.md, "Loss knobs")."""

    clip_low: float = Field(default=STEP.clip_low, ge=0, description="PPO ratio clip below: 1 - clip_low")
    clip_high: float = Field(
        default=STEP.clip_high, ge=0, description="PPO ratio clip above: 1 + clip_high (clip-higher)"
    )
    kl_coef: float = Field(
        default=STEP.kl_coef,
        ge=0,
        description="KL penalty to the base model (adapter disabled, k3 estimator); 0 skips the ref pass",
    )
    ratio_level: Literal["token", "sequence"] = Field(
        default=STEP.ratio_level,
        description="token: r_t = pi/pi_prox per token (PPO); sequence: GSPO's length-normalised "
        "exp(mean_t log r_t), one ratio per sequence, clipped by seq_clip_low/high",
    )
    seq_clip_low: float = Field(
        default=STEP.seq_clip_low,
        ge=0,
        description="Sequence ratio clip below: 1 - seq_clip_low (GSPO: 3e-4)",
    )
    seq_clip_high: float = Field(
        default=STEP.seq_clip_high,
        ge=0,
        description="Sequence ratio clip above: 1 + seq_clip_high (GSPO: 4e-4)",
    )
    loss_agg_mode: Literal["token-mean", "seq-mean-token-mean", "seq-mean-token-sum-norm"] = Field(
        default=STEP.loss_agg_mode,
        description="verl's names: token-mean (every token of the step alike), seq-mean-token-mean "
        "(each sequence's mean, then the mean over sequences), seq-mean-token-sum-norm (Dr. GRPO: "
        "each sequence's sum over the constant norm_tokens, mean over sequences)",
    )
    norm_tokens: int = Field(
        default=STEP.norm_tokens,
        ge=0,
        description="The constant of seq-mean-token-sum-norm (the generation budget, e.g. the "
        "sampler's max_new_tokens); 0 = the step's longest response",
    )


class RolloutCorrectionSettings(Section):
    """Masked corrections of the train/inference mismatch rho_t = pi_prox/pi_behaviour, beside TIS.

    A masked token (or every token of a gated sequence) contributes no policy gradient; its
    tokens still count in the aggregation's denominator. Both off by default (high = 0)."""

    tis_cap: float = Field(
        default=STEP.tis_cap,
        ge=0,
        description="Truncated importance weight cap on pi_proximal/pi_behaviour; 0 disables",
    )

    token_mask_low: float = Field(
        default=STEP.token_mask_low,
        ge=0,
        description="IcePop: tokens with rho_t below this are masked (when on)",
    )
    token_mask_high: float = Field(
        default=STEP.token_mask_high,
        ge=0,
        description="IcePop: tokens with rho_t above this are masked; 0 = off (e.g. 2.0)",
    )
    seq_mask_low: float = Field(
        default=STEP.seq_mask_low,
        ge=0,
        description="Sequences whose geometric-mean rho is below this are masked (when on)",
    )
    seq_mask_high: float = Field(
        default=STEP.seq_mask_high,
        ge=0,
        description="Sequences whose geometric-mean rho exp(mean_t log rho_t) is above this are masked; "
        "0 = off (e.g. 2.0)",
    )


class OverlongSettings(Section):
    """Responses cut at the sampler's max_new_tokens (node.sampled finish_reason "length")."""

    mode: Literal["keep", "mask", "penalty"] = Field(
        default="keep",
        description="keep: train them like any other; mask: leave cut responses out of the loss "
        "(DAPO's overlong filtering; they still count in their group's advantages); penalty: add "
        "DAPO's soft overlong punishment to every member's reward before the advantages",
    )
    max_tokens: int = Field(
        default=0,
        ge=0,
        description="L_max of the penalty: the sampler's max_new_tokens (required with mode=penalty)",
    )
    buffer_tokens: int = Field(
        default=0,
        ge=0,
        description="L_cache: the penalty ramps from 0 at L_max - L_cache tokens to -factor at L_max",
    )
    factor: float = Field(
        default=1.0, ge=0, description="Penalty at (and beyond) L_max tokens, in reward units"
    )

    @model_validator(mode="after")
    def _penalty_needs_a_length(self) -> OverlongSettings:
        if self.mode == "penalty" and not (0 < self.buffer_tokens <= self.max_tokens):
            raise ValueError("overlong.mode=penalty needs 0 < buffer_tokens <= max_tokens")
        return self

    def penalty(self, length: int) -> float:
        """DAPO's R_length: 0 up to L_max - L_cache, then linear down to -factor at L_max."""
        start = self.max_tokens - self.buffer_tokens
        if length <= start:
            return 0.0
        return -self.factor * min(1.0, (length - start) / self.buffer_tokens)


class OptimizerSettings(Section):
    """AdamW on the adapter."""

    lr: float = Field(default=STEP.lr, gt=0, description="AdamW learning rate")
    weight_decay: float = Field(default=STEP.weight_decay, ge=0, description="AdamW weight decay")
    betas: tuple[float, float] = Field(default=STEP.betas, description="AdamW betas")
    grad_clip: float = Field(
        default=STEP.grad_clip, ge=0, description="Max global grad norm; 0 disables clipping"
    )


class StepSettings(Section):
    """When a step happens and how many updates it makes."""

    groups_per_step: int = Field(
        default=0, ge=0, description="Groups per step; 0 = tasks x expansions (sync: one step per round)"
    )
    ppo_epochs: int = Field(default=STEP.ppo_epochs, ge=1, description="Passes over each batch")
    mini_batches: int = Field(
        default=STEP.mini_batches, ge=1, description="Optimizer steps per pass (the batch split by groups)"
    )
    recompute_proximal: Literal["auto", "always"] = Field(
        default=STEP.recompute_proximal,
        description=(
            "auto: with one optimizer step per batch the proximal logprobs equal the training forward's "
            "(detached), so the old_log_prob pass is skipped"
        ),
    )
    min_seconds: float = Field(
        default=0.0,
        ge=0,
        description="Pad each step to at least this long (a deliberately slow learner, for overlap tests)",
    )


class PackingSettings(Section):
    """How a step's sequences become micro-batches, and what memory each costs."""

    micro_batch_tokens: int = Field(
        default=STEP.micro_batch_tokens, ge=1, description="Token budget of one packed micro-batch"
    )
    logprob_chunk_tokens: int = Field(
        default=STEP.logprob_chunk_tokens,
        ge=1,
        description="Rows of the LM head computed at once (never the full logits)",
    )
    gradient_checkpointing: bool = Field(
        default=False, description="Recompute activations in backward (for budgets that do not fit)"
    )
    max_response_tokens: int = Field(
        default=STEP.max_response_tokens,
        ge=0,
        description="Truncate responses to this many tokens for training; 0 keeps all",
    )
    share_prompts: bool = Field(
        default=STEP.share_prompts,
        description="Siblings with the same prompt compute it once per micro-batch (exact; docs/LEARNER.md)",
    )
