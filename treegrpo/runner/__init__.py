"""The one-command run: NATS, four service processes, progress, export and report.

Public surface (import from here): `RunFile`, `load_run_file`, `RunnerSettings`, `execute` ->
`RunResult`; the shipped examples a run file may name (`example`, `example_names`, `examples_dir`,
`resolve_run_file`); a run's lifecycle facts (`new_run_id`, `claim_run`, `reopen_run`, `end_run`,
`record_end`); the live `Progress` folded from a run's events.
"""

from treegrpo.runner._config import RunFile, RunnerSettings, load_run_file
from treegrpo.runner._examples import example, example_names, examples_dir, resolve_run_file
from treegrpo.runner._execute import RunResult, execute
from treegrpo.runner._lifecycle import claim_run, end_run, new_run_id, record_end, reopen_run
from treegrpo.runner._progress import Progress

__all__ = [
    "Progress",
    "RunFile",
    "RunResult",
    "RunnerSettings",
    "claim_run",
    "end_run",
    "example",
    "example_names",
    "examples_dir",
    "execute",
    "load_run_file",
    "new_run_id",
    "record_end",
    "reopen_run",
    "resolve_run_file",
]
