"""Task lookup by id across the built-in tasks and configured MLE-bench data roots."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path

from treegrpo.config import treegrpo_home
from treegrpo.tasks._builtin import BUILTINS, DEFAULT_SEED, ensure_builtin_tasks
from treegrpo.tasks._mlebench import list_competitions, read_competition
from treegrpo.tasks._task import Task


class UnknownTask(LookupError):
    """No built-in task and no data root has this id."""


class TaskRegistry:
    """Built-in ids resolve first (generated on first use); then each MLE-bench root in order."""

    def __init__(
        self,
        home: Path | None = None,
        mlebench_roots: Sequence[Path | str] = (),
        seed: int = DEFAULT_SEED,
        private: bool = True,
    ):
        self.home = Path(home) if home is not None else treegrpo_home()
        self.roots = [Path(r).expanduser() for r in mlebench_roots]
        self.seed = seed
        self.private = private  # False: built-ins get public folders only (sampler, executor hosts)
        self._tasks: dict[str, Task] = {}
        self._lock = threading.Lock()  # generation may be asked for from worker threads

    def get(self, task_id: str) -> Task:
        with self._lock:
            if task_id not in self._tasks:
                self._tasks[task_id] = self._resolve(task_id)
            return self._tasks[task_id]

    def _resolve(self, task_id: str) -> Task:
        if task_id in BUILTINS:
            return ensure_builtin_tasks(self.home, self.seed, tasks=[task_id], private=self.private)[task_id]
        for root in self.roots:
            task = read_competition(root, task_id)
            if task is not None:
                return task
        raise UnknownTask(
            f"unknown task {task_id!r}: built-in tasks are {sorted(BUILTINS)}; "
            f"MLE-bench roots searched: {[str(r) for r in self.roots] or 'none configured'}"
        )

    def ids(self) -> list[str]:
        found = list(BUILTINS)
        for root in self.roots:
            found += [c for c in list_competitions(root) if c not in found]
        return found


def get_task(
    task_id: str, home: Path | None = None, mlebench_roots: Sequence[Path | str] = (), private: bool = True
) -> Task:
    """One task by id (built-in tasks are generated into `home` on first use; with
    `private=False` only their public folders, for processes that must not hold answers)."""
    return TaskRegistry(home, mlebench_roots, private=private).get(task_id)


def list_tasks(home: Path | None = None, mlebench_roots: Sequence[Path | str] = ()) -> list[str]:
    return TaskRegistry(home, mlebench_roots).ids()
