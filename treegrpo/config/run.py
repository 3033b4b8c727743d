"""RunSpec: what one training run is. Published in full in `run.started`.

Where the bus is and where traces go are each service's own settings (`ServiceSettings`), not the
run's: runs recorded before this held `nats` and `telemetry` here, and their JSON still reads.
"""

from __future__ import annotations

import json
from typing import Literal

from pydantic import Field, field_validator
from pydantic_settings import SettingsConfigDict

from treegrpo.config._base import Section, Settings, from_values
from treegrpo.events import check_token


class RespendSettings(Section):
    """Zero-variance sibling groups re-spent by the search (treegrpo/respend.py, docs/SAMPLER.md).

    Once every expansion of a task-round is scored, each group whose rewards do not vary (all
    failed, all equal) is a candidate, in step order; each gets up to `max_extra_siblings` new
    siblings while the round's token budget lasts. A new sibling reserves the sampler's
    `max_new_tokens` of the budget before it is sampled, the most it can generate, so the budget
    holds for what is generated, not for an estimate. With it on the learner also leaves groups
    without signal out of its steps (counted: `groups_skipped_no_signal`)."""

    enabled: bool = Field(default=False, description="Re-spend zero-variance groups (off: today's search)")
    mode: Literal["grow", "reparent"] = Field(
        default="grow",
        description="grow: more siblings of the same expansion (same parent, mode and prompt); "
        "reparent: re-run the expansion from another parent of the round (softmax over rewards, "
        "the group's own parent left out; a round with no other parent grows instead)",
    )
    max_extra_siblings: int = Field(
        default=8, ge=0, description="Cap of new siblings per re-spent group (they form one new group)"
    )
    min_extra_siblings: int = Field(
        default=2,
        ge=2,
        description="Fewer than this left in the budget re-spends nothing (a group of one has no variance)",
    )
    round_token_budget: int = Field(
        default=16384,
        ge=0,
        description="Response tokens the re-spends of one task-round may generate at most; "
        "0 = re-spend nothing (the learner still skips groups without signal: verl's filter_groups)",
    )


class TreeSettings(Section):
    expansions: int = Field(default=4, ge=1, description="E: expansions per task and round (the seed: 4)")
    group_size: int = Field(
        default=16, ge=1, description="G: siblings per expansion, one GRPO group (the seed: 16)"
    )
    drafts: int = Field(default=2, ge=1, description="Expansions 0..drafts-1 are drafts (the seed: 2)")
    parent_temperature: float = Field(
        default=1.0, gt=0, description="Softmax temperature over node rewards when choosing a parent"
    )
    respend: RespendSettings = Field(
        default_factory=RespendSettings, description="Zero-variance groups re-spent (default off)"
    )


# fields RunSpec once had, found in the JSON of recorded `run.started` events
RETIRED_KEYS = frozenset({"nats", "telemetry"})


class RunSpec(Settings):
    """One run: which tasks, how many rounds, the tree shape, sync or async training."""

    model_config = SettingsConfigDict(env_prefix="TREEGRPO_RUN_", extra="forbid", env_nested_delimiter="__")

    run_id: str = Field(
        default="", description="Run id (subject-safe); empty means a timestamp like 20260701_231713"
    )
    tasks: list[str] = Field(
        default_factory=lambda: ["spooky-mini"], description="Task ids from the grader's registry"
    )
    rounds: int = Field(
        default=2,
        ge=1,
        description="Tree-search rounds per task; each round is one learner step in sync mode",
    )
    tree: TreeSettings = Field(default_factory=TreeSettings, description="Round anatomy")
    train: bool = Field(default=True, description="False runs search only (--no-train): a capability probe")
    max_staleness: int = Field(
        default=0,
        ge=0,
        description=(
            "0 = sync (round r+1 waits for the policy trained on r); k = sample up to k versions ahead"
        ),
    )
    resource_gate: bool = Field(
        default=True,
        description="Parse PEP 723 [tool.resources] and record the 7 gate keys (32-key node schema)",
    )
    seed: int = Field(default=0, description="Seed of the tree policy's RNG and of sampling")
    model: str = Field(default="", description="Base model path recorded in summaries (the sampler's model)")
    phase: Literal["train", "eval"] = Field(default="train", description="Recorded in round summaries")

    @field_validator("run_id")
    @classmethod
    def _run_id_is_token(cls, v: str) -> str:
        return check_token(v, "run_id") if v else v

    @field_validator("tasks")
    @classmethod
    def _tasks_nonempty(cls, v: list[str]) -> list[str]:
        if not v:
            raise ValueError("at least one task")
        return v

    @classmethod
    def from_json(cls, text: str) -> RunSpec:
        """The spec as `run.started` recorded it (`run_spec_json`). Raises ValueError if it does not
        validate. Keys this class no longer has (RETIRED_KEYS) are ignored: the log is immutable;
        and the reader's environment (TREEGRPO_RUN_*) is not applied: it is no source of a past
        run's facts."""
        try:
            raw = json.loads(text)
        except json.JSONDecodeError as exc:  # a ValueError that names what it failed to read
            raise ValueError(f"run.started's run spec is no JSON: {exc}") from exc
        if not isinstance(raw, dict):  # a forged or corrupt fact: say so, never an AttributeError
            raise ValueError(f"run.started's run spec is a JSON {type(raw).__name__}, not an object")
        data = {k: v for k, v in raw.items() if k not in RETIRED_KEYS}
        return from_values(cls, data, "run.started")

    @classmethod
    def of_run(cls, run_id: str, text: str) -> RunSpec:
        """`from_json`, and the spec must be that run's: a `run.started` whose spec names another
        run id was written by no runner of ours (ValueError, like a spec that does not validate)."""
        spec = cls.from_json(text)
        if spec.run_id and spec.run_id != run_id:
            raise ValueError(f"run.started of run {run_id} carries the spec of run {spec.run_id}")
        return spec
