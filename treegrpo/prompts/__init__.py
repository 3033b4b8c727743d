"""The agent's prompts: the draft / improve / debug templates (package data in `templates/`), their
rendering and a task's context (description + data overview of its public folder). Shared by the
sampler, which serves these prompts, and the SFT, which trains on exactly the same text.

    from treegrpo.prompts import PromptSettings, render_prompt, task_context
    ctx = task_context("spooky-mini")
    messages = render_prompt("draft", ctx.description, ctx.data_overview)   # [system, user]
"""

from treegrpo.prompts._render import (
    MODES,
    Mode,
    TaskContext,
    builtin_templates,
    data_overview,
    find_public_dir,
    render_prompt,
    task_context,
    trim_output,
)
from treegrpo.prompts._settings import PromptSettings

__all__ = [
    "MODES",
    "Mode",
    "PromptSettings",
    "TaskContext",
    "builtin_templates",
    "data_overview",
    "find_public_dir",
    "render_prompt",
    "task_context",
    "trim_output",
]
