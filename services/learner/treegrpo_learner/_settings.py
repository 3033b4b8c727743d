"""What one training step needs to know, and the one place its defaults are declared.

Plain dataclasses (no torch, no pydantic): the GPU benchmarks build a `TrainerSettings` where
pydantic is not installed, and `treegrpo_learner.config` (which the runner imports to read a run
file) takes its defaults from here without loading torch. The config's sections
(`optimizer`, `policy_loss`, `rollout_correction`, `step`, `packing`) add the descriptions and
bounds; `TrainerSettings.from_config` reads the step's fields back out of them by name.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

# the LearnerConfig sections a step's settings are read from (then its top level)
SECTIONS = ("optimizer", "policy_loss", "rollout_correction", "step", "packing")


@dataclass(frozen=True)
class TrainerSettings:
    """One step's settings, flat (each name lives in exactly one LearnerConfig section)."""

    # optimizer
    lr: float = 1e-5
    betas: tuple[float, float] = (0.9, 0.999)
    weight_decay: float = 0.0
    grad_clip: float = 1.0
    # policy_loss
    clip_low: float = 0.2
    clip_high: float = 0.28
    kl_coef: float = 0.0
    ratio_level: str = "token"
    seq_clip_low: float = 3e-4
    seq_clip_high: float = 4e-4
    loss_agg_mode: str = "token-mean"
    norm_tokens: int = 0
    # rollout_correction
    tis_cap: float = 2.0
    token_mask_low: float = 0.5
    token_mask_high: float = 0.0
    seq_mask_low: float = 0.5
    seq_mask_high: float = 0.0
    # step
    ppo_epochs: int = 1
    mini_batches: int = 1
    recompute_proximal: str = "auto"
    # packing
    micro_batch_tokens: int = 16384
    logprob_chunk_tokens: int = 2048
    max_response_tokens: int = 0
    share_prompts: bool = True
    # the top level
    gdn_backend: str = "auto"
    device: str = "cpu"
    dtype: str = "float32"

    @classmethod
    def from_config(cls, cfg) -> TrainerSettings:
        """From a LearnerConfig: each field from the section that holds it, else the top level."""
        scopes = [*(getattr(cfg, k) for k in SECTIONS if hasattr(cfg, k)), cfg]
        out = {}
        for f in fields(cls):
            for scope in scopes:
                if hasattr(scope, f.name):
                    out[f.name] = getattr(scope, f.name)
                    break
        return cls(**out)


DEFAULTS = TrainerSettings()


@dataclass(frozen=True)
class LossSettings:
    """The policy loss's settings (`treegrpo_learner._loss`), a subset of TrainerSettings' names."""

    clip_low: float = DEFAULTS.clip_low
    clip_high: float = DEFAULTS.clip_high
    tis_cap: float = DEFAULTS.tis_cap  # 0 disables the importance weights
    kl_coef: float = DEFAULTS.kl_coef
    ratio_level: str = DEFAULTS.ratio_level  # or "sequence" (GSPO)
    seq_clip_low: float = DEFAULTS.seq_clip_low
    seq_clip_high: float = DEFAULTS.seq_clip_high
    # IcePop: tokens with rho outside [low, high] train nothing; each bound acts only with high > 0
    token_mask_low: float = DEFAULTS.token_mask_low
    token_mask_high: float = DEFAULTS.token_mask_high
    # a sequence whose geometric-mean rho is outside trains nothing (high > 0)
    seq_mask_low: float = DEFAULTS.seq_mask_low
    seq_mask_high: float = DEFAULTS.seq_mask_high

    @classmethod
    def of(cls, settings: TrainerSettings) -> LossSettings:
        return cls(**{f.name: getattr(settings, f.name) for f in fields(cls)})
