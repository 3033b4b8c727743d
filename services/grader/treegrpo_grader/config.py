"""GraderConfig: where tasks live, how big a submission may be, how rewards are shaped."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field
from pydantic_settings import SettingsConfigDict

from treegrpo.config import InfraSettings, Section, ServiceSettings, treegrpo_home
from treegrpo.events import FAILURE_STATUSES
from treegrpo_grader.rewards import DEFAULT_PENALTY, Shaping

_PENALTY = dict(default=DEFAULT_PENALTY, ge=-1.0, le=0.0)


class RewardSettings(Section):
    """Failure penalties per final status, and the temperature of the valid siblings' reward."""

    crashed: float = Field(
        **_PENALTY, description="Reward of a node whose script raised (the seed: -0.5; -0.2 available)"
    )
    timeout: float = Field(**_PENALTY, description="Reward of a node killed at its time limit")
    no_code: float = Field(**_PENALTY, description="Reward of a completion with no runnable code block")
    no_submission: float = Field(
        **_PENALTY, description="Reward of a script that ran but wrote no submission.csv"
    )
    invalid_submission: float = Field(**_PENALTY, description="Reward of a submission the grader rejected")
    temperature: float = Field(
        default=0.5, gt=0, description="τ in σ((o − mean valid o)/τ), in oriented-metric units"
    )

    def shaping(self) -> Shaping:
        penalties = {s.value: getattr(self, s) for s in FAILURE_STATUSES}  # a field per failure status
        return Shaping(penalties=penalties, temperature=self.temperature)


class GraderConfig(ServiceSettings):
    model_config = SettingsConfigDict(
        env_prefix="TREEGRPO_GRADER_", extra="forbid", env_nested_delimiter="__"
    )

    tasks_home: str = Field(
        default="",
        description=(
            "Folder holding tasks/public and tasks/private of the built-in tasks; empty = $TREEGRPO_HOME"
        ),
    )
    builtin_seed: int = Field(
        default=0,
        description=(
            "Seed the built-in tasks are generated from (the executor must see the same public files)"
        ),
    )
    prepare_builtins: bool = Field(
        default=True, description="Generate the built-in tasks at start-up rather than on the first node"
    )
    mlebench_roots: list[str] = Field(
        default_factory=list, description="MLE-bench data roots: <root>/<competition>/prepared/public|private"
    )
    max_submission_bytes: int = Field(
        default=64 * 2**20,
        ge=1024,
        description="Larger submissions are invalid_submission without being downloaded",
    )
    max_inflight: int = Field(
        default=4, ge=1, le=64, description="Nodes graded at once (grading runs in worker threads)"
    )
    scratch_dir: str = Field(
        default="", description="Where submissions are downloaded to be graded; empty = a private temp folder"
    )
    unknown_task_retry_s: float = Field(
        default=5.0,
        gt=0,
        description="Retry delay when a task's data or answers are missing; after `infra.attempts` "
        "the node is masked as an infrastructure fault",
    )
    infra: InfraSettings = Field(
        default_factory=InfraSettings,
        description="Grading that fails on our side (answers, task data, store): retries, masking, stopping",
    )
    rewards: RewardSettings = Field(default_factory=RewardSettings, description="Reward shaping")

    def home(self) -> Path:
        return Path(self.tasks_home).expanduser() if self.tasks_home else treegrpo_home()
