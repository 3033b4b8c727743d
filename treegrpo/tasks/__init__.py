"""Tasks: the registry, the built-in offline tasks, MLE-bench data roots, metrics and grading. In the
core because several services use it: the grader grades, the sampler reads descriptions, the SFT
verifies its corpus, the runner generates the built-in tasks (needs the `grader` extra: pandas, ...).

    from treegrpo.tasks import ensure_builtin_tasks, get_task, grade_submission
    tasks = ensure_builtin_tasks()                 # generate once into $TREEGRPO_HOME/tasks/
    task = get_task("spooky-mini")                 # or an MLE-bench competition id + mlebench_roots
    result = grade_submission(task, Path("submission.csv"))   # GradeResult(status, test_metric, ...)
"""

from treegrpo.tasks._builtin import (
    BUILTINS,
    GENERATOR_VERSION,
    LEARNING_BUILTINS,
    LOAD_TASKS,
    builtin_task,
    ensure_builtin_tasks,
    generate_task,
)
from treegrpo.tasks._grade import (
    AnswersUnavailable,
    GradeResult,
    grade_submission,
    load_answers,
    score_frame,
)
from treegrpo.tasks._load import LOAD_SOURCE, completion_score
from treegrpo.tasks._mlebench import (
    UnsupportedCompetition,
    list_competitions,
    mlebench_available,
    read_competition,
)
from treegrpo.tasks._registry import TaskRegistry, UnknownTask, get_task, list_tasks
from treegrpo.tasks._submission import DEFAULT_MAX_BYTES, InvalidSubmission, check_size, read_submission
from treegrpo.tasks._task import (
    COMPETITIONS,
    CompetitionSpec,
    Grading,
    Metric,
    Task,
    Validation,
    task_from_spec,
)

__all__ = [
    "check_size",
    "completion_score",
    "BUILTINS",
    "COMPETITIONS",
    "DEFAULT_MAX_BYTES",
    "GENERATOR_VERSION",
    "LEARNING_BUILTINS",
    "LOAD_SOURCE",
    "LOAD_TASKS",
    "AnswersUnavailable",
    "CompetitionSpec",
    "GradeResult",
    "Grading",
    "InvalidSubmission",
    "Metric",
    "Task",
    "TaskRegistry",
    "UnknownTask",
    "UnsupportedCompetition",
    "Validation",
    "builtin_task",
    "ensure_builtin_tasks",
    "generate_task",
    "get_task",
    "grade_submission",
    "list_competitions",
    "list_tasks",
    "load_answers",
    "mlebench_available",
    "read_competition",
    "read_submission",
    "score_frame",
    "task_from_spec",
]
