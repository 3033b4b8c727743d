"""treegrpo installed as users install it: the wheel built from the checkout, installed into a fresh
virtual environment and run from a folder outside the checkout, finds everything the CLI reads at
run time (the example run files, the prompt templates, the seed corpus of the demo's SFT) through
importlib.resources, not through paths relative to the source tree.

Offline and honest: the wheel is the only treegrpo the new environment sees (no editable finder, no
PYTHONPATH); its third-party dependencies come from this environment's site-packages via a .pth line.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from treegrpo.runner import load_run_file
from treegrpo.runner._examples import example, example_names
from treegrpo.services.learner.sft._demo import DEMO_SFT, DEMO_SIZE, fingerprint
from treegrpo.services.learner.sft.config import SftConfig

pytestmark = pytest.mark.timeout(120)

ROOT = Path(__file__).resolve().parents[2]
# what `treegrpo demo` reads before its first SFT step, from the installed package
CHECK = """
import json
import treegrpo
from treegrpo.prompts import builtin_templates, render_prompt
from treegrpo.runner import load_run_file
from treegrpo.runner._examples import example, example_names, resolve_run_file
from treegrpo.services.learner.sft._corpus import corpus_dir, load_corpus
from treegrpo.services.learner.sft._demo import DEMO_SFT, DEMO_SIZE, fingerprint
from treegrpo.services.learner.sft.config import SftConfig

print(json.dumps({
    "package": treegrpo.__file__, "examples": example_names(),
    "demo": load_run_file(resolve_run_file(example("demo"))).spec().model_dump(mode="json"),
    "run_small": load_run_file(resolve_run_file("run-small")).spec().model_dump(mode="json"),
    "corpus": str(corpus_dir()), "scripts": [s.file.is_file() for s in load_corpus()],
    "templates": [t.name for t in builtin_templates()],
    "fingerprint": fingerprint(SftConfig(**DEMO_SFT), DEMO_SIZE),
    "prompt": render_prompt("draft", "Predict the author.", "input/")[1]["content"]}))
"""


def _run(argv: list[str], cwd: Path, env: dict[str, str] | None = None) -> str:
    done = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=100)
    assert done.returncode == 0, f"{argv[:4]}: {done.stdout[-2000:]}{done.stderr[-3000:]}"
    return done.stdout


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> tuple[Path, dict[str, str], Path]:
    """(the new environment's bin/, the environment to run it in, a folder outside the checkout)."""
    tmp = tmp_path_factory.mktemp("wheel")
    src = tmp / "src"  # the Docker image's build context: pyproject, README, the package
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    shutil.copytree(ROOT / "treegrpo", src / "treegrpo", ignore=shutil.ignore_patterns("__pycache__"))
    _run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "-q",
            "--no-deps",
            "--no-build-isolation",
            "-w",
            str(tmp / "dist"),
            str(src),
        ],
        tmp,
    )
    (wheel,) = (tmp / "dist").glob("treegrpo-*.whl")
    venv = tmp / "venv"
    _run([sys.executable, "-m", "venv", "--without-pip", str(venv)], tmp)
    _run(
        [
            sys.executable,
            "-m",
            "pip",
            "--python",
            str(venv / "bin" / "python"),
            "install",
            "-q",
            "--no-deps",
            "--no-index",
            str(wheel),
        ],
        tmp,
    )
    site = Path(
        _run(
            [str(venv / "bin" / "python"), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            tmp,
        ).strip()
    )
    (site / "_deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")  # dependencies only: see below
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    outside = tmp / "elsewhere"
    outside.mkdir()
    env["TREEGRPO_HOME"] = str(outside / "home")
    return venv / "bin", env, outside


def test_the_installed_cli_starts_outside_the_checkout(installed):
    bin_dir, env, outside = installed
    out = _run([str(bin_dir / "treegrpo"), "demo", "--help"], outside, env)
    assert "--config" in out and "--control" in out


def test_the_installed_package_finds_its_configs_templates_and_corpus(installed):
    bin_dir, env, outside = installed
    found = json.loads(_run([str(bin_dir / "python"), "-c", CHECK], outside, env))
    package = Path(found["package"]).parent
    # the wheel is the treegrpo that ran, not this checkout (a .pth only adds directories: the
    # editable install's finder, a .pth of its own, is not run)
    assert package.is_relative_to(bin_dir.parent) and not package.is_relative_to(ROOT)
    assert Path(found["corpus"]).is_relative_to(package)
    assert found["examples"] == example_names() and "run-small" in found["examples"]
    assert found["demo"] == load_run_file(example("demo")).spec().model_dump(mode="json")
    assert found["run_small"] == load_run_file(example("run-small")).spec().model_dump(mode="json")
    assert len(found["scripts"]) == 113 and all(found["scripts"])
    assert found["templates"] == ["_instructions.md", "debug.md", "draft.md", "improve.md", "system.md"]
    # the demo policy's cache key covers the corpus and the templates, byte for byte: the installed
    # copies are the checkout's, so an installed treegrpo trains (and caches) the same demo policy
    assert found["fingerprint"] == fingerprint(SftConfig(**DEMO_SFT), DEMO_SIZE)
    assert "Predict the author." in found["prompt"]
