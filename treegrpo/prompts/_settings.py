"""PromptSettings: how prompts are rendered. One schema for the sampler (`[sampler.prompts]`) and the
SFT (`[sft.prompts]`), so a fine-tuning pair's prompt is the one the sampler serves."""

from __future__ import annotations

from pydantic import Field

from treegrpo.config import Section


class PromptSettings(Section):
    gpu_hint: bool = Field(
        default=False,
        description="Add the GPU-declaration hint the seed's probe used (steers the policy; off by default)",
    )
    show_scores: bool = Field(
        default=False,
        description=(
            "Show the parent's validation output score line in improve prompts "
            "(the seed's redesign removed shown scores)"
        ),
    )
    template_dir: str = Field(
        default="",
        description="Folder with draft.md/improve.md/debug.md/system.md overriding the built-in templates",
    )
    task_roots: list[str] = Field(
        default_factory=list,
        description=(
            "Roots holding <task>/description.md or <task>/prepared/public/; "
            "empty = $TREEGRPO_HOME/tasks/public"
        ),
    )
    time_limit_s: int = Field(default=600, ge=1, description="Wall-clock limit stated to the model")
    csv_head_lines: int = Field(
        default=4, ge=0, description="Lines shown from the head of each CSV in the data overview"
    )
