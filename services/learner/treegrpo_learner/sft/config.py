"""SftConfig: what to fine-tune, on which pairs, how long, where the result goes."""

from __future__ import annotations

from typing import Literal

from pydantic import Field
from pydantic_settings import SettingsConfigDict

from treegrpo.config import NatsSettings, Section, Settings, TelemetrySettings
from treegrpo.prompts import PromptSettings
from treegrpo_learner.config import LoraSettings


class CorpusSettings(Section):
    path: str = Field(
        default="",
        description=(
            "Seed corpus folder (manifest.json + <task>/*.py); empty = the one shipped in the package "
            "(treegrpo_learner/sft/corpus)"
        ),
    )
    tasks: list[str] = Field(
        default_factory=list, description="Only these tasks; empty = every task in the manifest"
    )
    draft: bool = Field(default=True, description="A draft pair per valid script")
    improve_per_script: int = Field(
        default=1,
        ge=0,
        description="Improve pairs per valid script: parents drawn from weaker valid scripts of its task",
    )
    improve_parents: int = Field(
        default=0,
        ge=0,
        description=(
            "Instead of improve_per_script: this many parents per task (spread over scores), "
            "each with improve_children strictly better scripts; siblings share the parent's prompt, "
            "so it is forwarded once (see share_prompts)"
        ),
    )
    improve_children: int = Field(default=4, ge=1, description="Children per parent when improve_parents > 0")
    debug: bool = Field(
        default=True, description="A debug pair per failing script: its real error output -> the fixed script"
    )
    require_verified: bool = Field(
        default=True,
        description="Use only scripts whose recorded verification matches their intent (see verify_corpus)",
    )
    valid_per_task: int = Field(
        default=0,
        ge=0,
        description=(
            "Use at most this many valid scripts per task, spread evenly over their verified scores "
            "(0 = all); debug pairs follow the kept ones"
        ),
    )
    draft_repeats: int = Field(
        default=1,
        ge=1,
        description="Repeat each draft pair this often per epoch (drafts are what round 1 samples most)",
    )


class ArchiveSettings(Section):
    runs: list[str] = Field(
        default_factory=list,
        description="Run ids whose event log supplies pairs (rejection-sampling fine-tuning)",
    )
    select: Literal["best-per-group", "top-k"] = Field(
        default="best-per-group",
        description=(
            "best-per-group: the highest-reward valid node of each sibling group; "
            "top-k: the k highest-reward valid nodes of each task"
        ),
    )
    top_k: int = Field(default=16, ge=1, description="k of top-k, per run and task")
    min_reward: float | None = Field(
        default=None, description="Skip selected nodes whose reward is below this"
    )


class SftConfig(Settings):
    """Supervised fine-tuning of the policy on prompt -> completion pairs (loss on completion tokens)."""

    model_config = SettingsConfigDict(env_prefix="TREEGRPO_SFT_", extra="forbid", env_nested_delimiter="__")

    model: str = Field(
        default="", description="Base model folder (transformers format); empty = $TREEGRPO_HOME/models/small"
    )
    out_dir: str = Field(
        default="",
        description="Where the fine-tuned model (or adapter) is written; empty = $TREEGRPO_HOME/models/sft",
    )
    method: Literal["full", "lora"] = Field(
        default="full", description="full: every weight (small local models); lora: an adapter (large models)"
    )
    lora: LoraSettings = Field(default_factory=LoraSettings, description="Adapter shape when method = lora")
    merge_lora: bool = Field(
        default=True,
        description=(
            "lora: merge the adapter into a full model folder (usable as a new base); "
            "false writes the adapter only"
        ),
    )
    lr: float = Field(
        default=2e-3,
        gt=0,
        description=(
            "Peak AdamW learning rate (full fine-tuning of a small model wants ~1e-3; "
            "LoRA of a large one ~1e-4)"
        ),
    )
    weight_decay: float = Field(default=0.0, ge=0, description="AdamW weight decay")
    warmup_steps: int = Field(
        default=10, ge=0, description="Linear warm-up steps, then cosine decay to lr_min_ratio * lr"
    )
    lr_min_ratio: float = Field(
        default=0.1, ge=0, le=1, description="Final learning rate as a share of the peak"
    )
    grad_clip: float = Field(default=1.0, ge=0, description="Max global grad norm; 0 disables")
    epochs: float = Field(
        default=3.0, gt=0, description="Passes over the pairs (fractional allowed); max_steps wins when set"
    )
    max_steps: int = Field(
        default=0, ge=0, description="Stop after this many optimizer steps; 0 = epochs decide"
    )
    max_seconds: float = Field(
        default=0.0,
        ge=0,
        description="Stop after this much wall time (saving what was trained); 0 = no limit",
    )
    batch_tokens: int = Field(
        default=8192,
        ge=64,
        description="Token budget of one optimizer step (padded prompt + completion tokens)",
    )
    max_seq_tokens: int = Field(
        default=4096, ge=64, description="Pairs longer than this are dropped (and counted)"
    )
    device: str = Field(default="cpu", description="torch device: cpu, cuda, cuda:1")
    dtype: Literal["float32", "bfloat16"] = Field(
        default="float32", description="Weights dtype (bfloat16 on GPUs)"
    )
    torch_threads: int = Field(default=0, ge=0, description="torch intra-op threads; 0 keeps torch's default")
    share_prompts: bool = Field(
        default=True,
        description=(
            "Pairs with one prompt (a task's drafts) forward it once per batch, its KV cache repeated over "
            "the completions; false packs every pair whole (and so does gradient_checkpointing)"
        ),
    )
    gradient_checkpointing: bool = Field(
        default=False, description="Recompute activations in backward (large models)"
    )
    seed: int = Field(default=0, description="Seed of pair order and of LoRA init")
    corpus: CorpusSettings = Field(default_factory=CorpusSettings, description="Pairs from the seed corpus")
    archive: ArchiveSettings = Field(
        default_factory=ArchiveSettings, description="Pairs from runs' event logs"
    )
    prompts: PromptSettings = Field(
        default_factory=PromptSettings, description="How prompts are rendered: must match the sampler's"
    )
    nats: NatsSettings = Field(
        default_factory=NatsSettings, description="Where the bus is (for --from-archive)"
    )
    telemetry: TelemetrySettings = Field(default_factory=TelemetrySettings, description="Traces")
