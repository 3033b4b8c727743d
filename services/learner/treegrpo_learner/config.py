"""LearnerConfig: which model and adapter, how to optimise, when to step, where versions go.

Nested by concern: what a step trains with (`optimizer`, `policy_loss`, `rollout_correction`,
`overlong`, `step`, `packing`: `treegrpo_learner._config_train`), where versions go (`publish`),
the learner's own state (`checkpoint`), the GPU it shares (`colocate`). The flat keys of before
(`lr`, `micro_batch_tokens`, ...) are refused with their new place (`MOVED`).
"""

from __future__ import annotations

import os
from typing import Any, Literal

from pydantic import Field, model_validator
from pydantic_settings import SettingsConfigDict

from treegrpo.config import Section, ServiceSettings
from treegrpo_learner._config_train import (
    OptimizerSettings,
    OverlongSettings,
    PackingSettings,
    PolicyLossSettings,
    RolloutCorrectionSettings,
    StepSettings,
)
from treegrpo_learner._settings import DEFAULTS as STEP

__all__ = [
    "MOVED",
    "CheckpointSettings",
    "ColocateSettings",
    "LearnerConfig",
    "LoraSettings",
    "OptimizerSettings",
    "OverlongSettings",
    "PackingSettings",
    "PolicyLossSettings",
    "PublishSettings",
    "RolloutCorrectionSettings",
    "StepSettings",
    "WandbSettings",
]

# the flat keys of the learner's config before its sections (issue 30): refused, naming the new key
MOVED = {
    **{k: f"optimizer.{k}" for k in ("lr", "weight_decay", "betas", "grad_clip")},
    **{k: f"policy_loss.{k}" for k in ("clip_low", "clip_high", "kl_coef")},
    "tis_cap": "rollout_correction.tis_cap",
    **{k: f"step.{k}" for k in ("ppo_epochs", "mini_batches", "recompute_proximal", "groups_per_step")},
    "min_step_seconds": "step.min_seconds",
    **{
        k: f"packing.{k}"
        for k in (
            "micro_batch_tokens",
            "logprob_chunk_tokens",
            "gradient_checkpointing",
            "max_response_tokens",
            "share_prompts",
        )
    },
    "publish_dtype": "publish.dtype",
    **{
        k: f"publish.{k}"
        for k in ("sampler_endpoints", "expect_loaded", "push_timeout_s", "loaded_timeout_s", "push_attempts")
    },
    "checkpoint_dir": "checkpoint.dir",
    "checkpoint_every": "checkpoint.every",
    "keep_checkpoints": "checkpoint.keep",
}


class LoraSettings(Section):
    r: int = Field(default=32, ge=1, description="LoRA rank (the seed: 32)")
    alpha: float = Field(default=32.0, gt=0, description="LoRA alpha (the seed: 32)")
    dropout: float = Field(default=0.0, ge=0, lt=1, description="LoRA dropout")
    target_modules: list[str] | Literal["all-linear"] = Field(
        default="all-linear",
        description="Modules to adapt; 'all-linear' = every linear projection except the LM head",
    )


class WandbSettings(Section):
    enabled: bool = Field(default=False, description="Log each step to Weights & Biases")
    project: str = Field(default="treegrpo", description="W&B project")
    mode: Literal["offline", "online"] = Field(
        default="offline", description="offline never touches the network; sync later with `wandb sync`"
    )
    dir: str = Field(default="", description="W&B run folder; empty = <checkpoint_dir>/wandb")


class ColocateSettings(Section):
    """A learner sharing its GPU with the sampler's vLLM engine (sleep mode, docs/VLLM.md)."""

    min_free_gib: float = Field(
        default=0.0,
        ge=0,
        description=(
            "Before a step, wait until the device has this much free memory (the engine has gone to "
            "sleep); 0 = never wait (a GPU of its own, or the CPU)"
        ),
    )
    wait_timeout_s: float = Field(
        default=900.0,
        gt=0,
        description="Longest wait for that memory; past it the step fails as transient (retried)",
    )
    engine_gib: float = Field(
        default=0.0,
        ge=0,
        description=(
            "Before loading the base model, wait until the device holds this much (the sampler's "
            "engine has started and sized its cache) and stays steady for settle_s; 0 = load at once"
        ),
    )
    settle_s: float = Field(default=20.0, gt=0, description="How long the device's use must stay steady")
    release_after_step: bool = Field(
        default=False,
        description=(
            "Return the step's cached activation memory to the device before publishing, so the "
            "engine can wake into it"
        ),
    )
    expandable_segments: bool = Field(
        default=True,
        description=(
            "With release_after_step: start CUDA with PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True "
            "(unless the environment sets that variable), so a release returns every free page, not "
            "only whole free segments; without it the optimizer's state, first allocated inside the "
            "step's activations, pins their segments (measured: 19 GiB held after the 9B's step)"
        ),
    )


class PublishSettings(Section):
    """Each version's adapter pushed to the samplers, and the confirmations awaited."""

    dtype: Literal["auto", "float32", "bfloat16"] = Field(
        default="auto",
        description="dtype of the adapter each version publishes (auto = the base's `dtype`): bfloat16 "
        "halves the push to the samplers, which serve a bf16 base in bf16 anyway; local checkpoints "
        "stay float32",
    )
    sampler_endpoints: list[str] = Field(
        default_factory=list, description="host:port of each sampler's WeightSync server; empty = no push"
    )
    expect_loaded: int = Field(
        default=-1,
        ge=-1,
        description=(
            "policy.loaded confirmations to wait for per version; -1 = one per sampler endpoint "
            "(0 with no push)"
        ),
    )
    push_timeout_s: float = Field(default=120.0, gt=0, description="One push's deadline (transfer + load)")
    loaded_timeout_s: float = Field(
        default=60.0,
        gt=0,
        description="Wait this long for policy.loaded of a pushed version before pushing again",
    )
    push_attempts: int = Field(
        default=5, ge=1, description="Pushes of one version before giving up (the sampler can still pull it)"
    )


class CheckpointSettings(Section):
    """The learner's own state on disk (adapter, optimizer, RNG, stream position)."""

    dir: str = Field(
        default="", description="Where checkpoints live; empty = $TREEGRPO_HOME/learner/<run_id>"
    )
    every: int = Field(default=1, ge=1, description="Save a checkpoint every k steps")
    keep: int = Field(default=2, ge=1, description="Checkpoints kept on disk")
    background: bool = Field(
        default=True,
        description=(
            "Write a step's checkpoint after its version's load is confirmed, while the next round "
            "generates (its next step waits for it only if it is not done), instead of before the push, "
            "on the step's path (2.1-2.4 s a 9B step on an H100). A crash in those seconds restores "
            "the published adapter with AdamW's moments started afresh, as between the checkpoints "
            "of `every` > 1"
        ),
    )


def refuse_moved(data: Any, where: str = "learner") -> None:
    """A flat key of the config before its sections (or its TREEGRPO_LEARNER_ variable) is an
    error naming where it lives now: silently ignoring `lr = 3e-3` would train at the default."""
    old = [k for k in MOVED if isinstance(data, dict) and k in data]
    old += [k for k in MOVED if f"TREEGRPO_LEARNER_{k.upper()}" in os.environ and k not in old]
    if old:
        moves = ", ".join(f"{where}.{k} is now {where}.{MOVED[k]}" for k in old)
        raise ValueError(f"moved settings: {moves}")


class LearnerConfig(ServiceSettings):
    """The learner service: GRPO/PPO on a LoRA adapter, one published version per step."""

    model_config = SettingsConfigDict(
        env_prefix="TREEGRPO_LEARNER_", extra="forbid", env_nested_delimiter="__"
    )

    model: str = Field(
        default="",
        description=(
            "Base model folder (transformers format); empty = $TREEGRPO_HOME/models/small "
            "(built by `treegrpo model init`)"
        ),
    )
    lora: LoraSettings = Field(default_factory=LoraSettings, description="Adapter shape")
    estimator: Literal["grpo", "grpo_valid_only", "rloo", "dr_grpo"] = Field(
        default="grpo_valid_only", description="Advantage estimator (DESIGN.md defines grpo_valid_only)"
    )
    optimizer: OptimizerSettings = Field(default_factory=OptimizerSettings, description="AdamW")
    policy_loss: PolicyLossSettings = Field(
        default_factory=PolicyLossSettings, description="Ratio level (token/GSPO) and loss aggregation"
    )
    rollout_correction: RolloutCorrectionSettings = Field(
        default_factory=RolloutCorrectionSettings,
        description="TIS, IcePop token masking and the sequence gate on the train/inference ratio",
    )
    overlong: OverlongSettings = Field(
        default_factory=OverlongSettings, description="What a response cut at max_new_tokens trains"
    )
    step: StepSettings = Field(default_factory=StepSettings, description="When to step, how many updates")
    packing: PackingSettings = Field(
        default_factory=PackingSettings, description="Micro-batches: token budget, shared prompts, memory"
    )
    gdn_backend: Literal["auto", "fla", "torch"] = Field(
        default=STEP.gdn_backend,
        description="Gated DeltaNet kernels (Qwen3.5/3.6): auto = flash-linear-attention on CUDA when it "
        "imports, else transformers' torch reference",
    )
    device: str = Field(
        default=STEP.device, description="torch device: cpu, cuda, cuda:1 (one rank; see devices)"
    )
    devices: list[str] = Field(
        default_factory=list,
        description=(
            'One device per data-parallel rank, e.g. ["cuda:0", "cuda:1"]: '
            "the base and adapter are sharded (FSDP2) and each step's sequences split by tokens; "
            "empty or one entry = one rank, unsharded (the default)"
        ),
    )
    dist_timeout_s: float = Field(
        default=600.0,
        gt=0,
        description="Deadline of one collective among the ranks (a hung rank fails the step after this long)",
    )
    dtype: Literal["float32", "bfloat16"] = Field(
        default=STEP.dtype, description="Base weights dtype (bfloat16 on GPUs); the adapter trains in float32"
    )
    torch_threads: int = Field(default=0, ge=0, description="torch intra-op threads; 0 keeps torch's default")
    seed: int = Field(default=0, description="Seed of adapter init and any sampling in training")
    publish: PublishSettings = Field(
        default_factory=PublishSettings, description="Versions pushed to the samplers"
    )
    checkpoint: CheckpointSettings = Field(
        default_factory=CheckpointSettings, description="The learner's state on disk"
    )
    run_id: str = Field(
        default="",
        description=(
            "Train only this run (its own durable consumer, filtered to its subjects); "
            "empty = the first open run seen, one at a time"
        ),
    )
    ack_wait_s: float = Field(
        default=60.0, gt=0, description="A crashed learner's unacked groups are redelivered after this long"
    )
    max_inflight_groups: int = Field(
        default=4096, ge=1, description="group.scored messages held unacked until trained"
    )
    wandb: WandbSettings = Field(default_factory=WandbSettings, description="Optional W&B logging")
    colocate: ColocateSettings = Field(
        default_factory=ColocateSettings, description="Sharing the GPU with the sampler's engine"
    )

    @model_validator(mode="before")
    @classmethod
    def _refuse_moved_keys(cls, data: Any) -> Any:
        refuse_moved(data)
        return data
