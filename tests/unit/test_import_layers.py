"""The import contracts of docs/ARCHITECTURE.md hold over the five distributions, and the checker that
enforces them (import-linter, also run by `make lint`) does catch a forbidden import: on a copy of
the five packages with one added, the contract it breaks is reported broken."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.timeout(90)

ROOT = Path(__file__).resolve().parents[2]
CORE = "The core imports no service"
INDEPENDENT = "No service imports another"
LAYERS = "The core's layers"
BUS = "Only treegrpo.bus talks to NATS"
SERVICES = ("sampler", "executor", "grader", "learner")


def copy_packages(dest: Path) -> None:
    """The core and the four service packages side by side under `dest` (one import root)."""
    skip = shutil.ignore_patterns("__pycache__", "data")
    shutil.copytree(ROOT / "treegrpo", dest / "treegrpo", ignore=skip)
    for name in SERVICES:
        shutil.copytree(ROOT / "services" / name / f"treegrpo_{name}", dest / f"treegrpo_{name}", ignore=skip)


def lint_imports(src: Path) -> subprocess.CompletedProcess:
    """`lint-imports` with this repository's contracts (pyproject.toml) over the packages under `src`."""
    code = "import sys; from importlinter.cli import lint_imports_command; sys.exit(lint_imports_command())"
    return subprocess.run(
        [sys.executable, "-c", code, "--no-cache", "--no-logo", "--config", str(ROOT / "pyproject.toml")],
        cwd=src,
        env={**os.environ, "PYTHONPATH": str(src)},
        capture_output=True,
        text=True,
        timeout=80,
    )


def test_the_five_distributions_keep_their_import_contracts(tmp_path):
    copy_packages(tmp_path)
    done = lint_imports(tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    for contract in (CORE, INDEPENDENT, LAYERS, BUS):
        assert contract in done.stdout and "BROKEN" not in done.stdout, done.stdout


@pytest.mark.parametrize(
    "module, line, broken",
    [
        ("treegrpo/tasks/_task.py", "import treegrpo_grader.service", CORE),  # the core imports a service
        ("treegrpo/runner/cli.py", "from treegrpo_learner.sft import prepare_demo_policy", CORE),
        ("treegrpo/report/_data.py", "from treegrpo.runner import execute", LAYERS),  # ... an entry point
        ("treegrpo/prompts/_render.py", "from treegrpo.report import build_report", LAYERS),  # a layer above
        ("treegrpo_learner/sft/_corpus.py", "from treegrpo_sampler import _parse", INDEPENDENT),
        ("treegrpo_executor/service.py", "import treegrpo_grader.rewards", INDEPENDENT),
        ("treegrpo/runner/_loop.py", "import nats", BUS),  # NATS past the bus: the core ...
        ("treegrpo_learner/_restore.py", "from nats.js.errors import NotFoundError", BUS),  # ... a service
    ],
    ids=[
        "core->service",
        "runner->learner",
        "core->runner",
        "prompts->report",
        "learner->sampler",
        "executor->grader",
        "runner->nats",
        "learner->nats",
    ],
)
def test_a_forbidden_import_breaks_its_contract(tmp_path, module, line, broken):
    copy_packages(tmp_path)
    path = tmp_path / module
    path.write_text(path.read_text() + f"\n{line}  # added by the test\n")
    done = lint_imports(tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    assert f"{broken}" in done.stdout and "BROKEN" in done.stdout, done.stdout
    assert module.replace("/", ".").removesuffix(".py") in done.stdout  # the report names the importer


def test_a_new_top_level_module_must_be_given_a_layer(tmp_path):
    copy_packages(tmp_path)
    (tmp_path / "treegrpo" / "unlayered.py").write_text('"""Not named in [tool.importlinter]."""\n')
    done = lint_imports(tmp_path)
    assert done.returncode == 1 and "unlayered" in done.stdout, done.stdout
