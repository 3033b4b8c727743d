"""The import layering of docs/ARCHITECTURE.md holds, and the checker that enforces it (import-linter,
also run by `make lint`) does catch a forbidden import: on a copy of the package with one added, the
contract it breaks is reported broken."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.timeout(60)

ROOT = Path(__file__).resolve().parents[2]
LAYERS = "Entry points over services over the shared core"
INDEPENDENT = "No service imports another"


def lint_imports(src: Path) -> subprocess.CompletedProcess:
    """`lint-imports` with this repository's contracts (pyproject.toml) over the `treegrpo` under `src`."""
    code = "import sys; from importlinter.cli import lint_imports_command; sys.exit(lint_imports_command())"
    return subprocess.run(
        [sys.executable, "-c", code, "--no-cache", "--no-logo", str(ROOT / "pyproject.toml")],
        cwd=src,
        env={**os.environ, "PYTHONPATH": str(src)},
        capture_output=True,
        text=True,
        timeout=50,
    )


def test_the_package_keeps_its_import_contracts():
    done = lint_imports(ROOT)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"{LAYERS} KEPT" in done.stdout and f"{INDEPENDENT} KEPT" in done.stdout


@pytest.mark.parametrize(
    "module, line, broken",
    [
        ("tasks/_task.py", "import treegrpo.services.grader.service", LAYERS),  # the core imports a service
        ("report/_data.py", "from treegrpo.runner import execute", LAYERS),  # ... an entry point
        ("prompts/_render.py", "from treegrpo.report import build_report", LAYERS),  # ... a layer above it
        ("services/learner/sft/_corpus.py", "from treegrpo.services.sampler import _parse", INDEPENDENT),
        ("services/executor/service.py", "import treegrpo.services.grader.rewards", INDEPENDENT),
    ],
    ids=["core->service", "core->runner", "prompts->report", "learner->sampler", "executor->grader"],
)
def test_a_forbidden_import_breaks_its_contract(tmp_path, module, line, broken):
    shutil.copytree(
        ROOT / "treegrpo", tmp_path / "treegrpo", ignore=shutil.ignore_patterns("__pycache__", "data")
    )
    path = tmp_path / "treegrpo" / module
    path.write_text(path.read_text() + f"\n{line}  # added by the test\n")
    done = lint_imports(tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    assert f"{broken} BROKEN" in done.stdout, done.stdout
    assert module.replace("/", ".").removesuffix(".py") in done.stdout  # the report names the importer


def test_a_new_top_level_module_must_be_given_a_layer(tmp_path):
    shutil.copytree(
        ROOT / "treegrpo", tmp_path / "treegrpo", ignore=shutil.ignore_patterns("__pycache__", "data")
    )
    (tmp_path / "treegrpo" / "unlayered.py").write_text('"""Not named in [tool.importlinter]."""\n')
    done = lint_imports(tmp_path)
    assert done.returncode == 1 and "unlayered" in done.stdout, done.stdout
