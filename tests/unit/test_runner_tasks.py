"""What the runner prepares before the services start.

Imports a private module: `treegrpo.runner._execute` (what these tests exercise is not on the package's
public surface).
"""

from __future__ import annotations

import pytest

from treegrpo.config import RunSpec
from treegrpo.runner._execute import prepare_tasks

pytestmark = pytest.mark.timeout(60)


def test_prepare_tasks_generates_only_the_built_in_tasks_the_run_names(tmp_path, monkeypatch):
    monkeypatch.setenv("TREEGRPO_HOME", str(tmp_path))
    prepare_tasks(RunSpec(tasks=["spooky-mini", "my-competition"]))
    assert sorted(p.name for p in (tmp_path / "tasks" / ".stamps").iterdir()) == ["spooky-mini"]
