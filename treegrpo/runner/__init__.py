"""The one-command run: NATS, four service processes, progress, export and report."""

from treegrpo.runner._config import RunFile, RunnerSettings, load_run_file
from treegrpo.runner._execute import RunResult, execute

__all__ = ["RunFile", "RunResult", "RunnerSettings", "execute", "load_run_file"]
