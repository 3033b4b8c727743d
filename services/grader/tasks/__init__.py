"""Tasks: the registry, the built-in offline tasks, MLE-bench data roots, metrics and grading."""

from services.grader.tasks._builtin import BUILTINS, ensure_builtin_tasks, generate_task
from services.grader.tasks._task import COMPETITIONS, CompetitionSpec, Metric, Task, Validation

__all__ = ["BUILTINS", "COMPETITIONS", "CompetitionSpec", "Metric", "Task", "Validation",
           "ensure_builtin_tasks", "generate_task"]
