"""The five distributions installed as users install them: wheels built from the checkout (the core
and the four services), installed into fresh virtual environments and run from a folder outside the
checkout. The CLI finds the services through their entry points, everything the CLI reads at run
time comes through importlib.resources, and an environment with the core and the executor alone
serves the executor against a real nats-server without torch.

Offline and honest: the wheels are the only treegrpo the new environments see (no editable finder,
no PYTHONPATH). Their third-party dependencies come from this environment's site-packages through a
folder of links that leaves out every treegrpo distribution (and, for the executor-only environment,
torch and the other heavy stacks, so importing one would fail, not just be noticed).

Imports a private module: `treegrpo.report._html`, `treegrpo_learner.sft._demo` (what these tests
exercise is not on the package's public surface).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import sysconfig
import time
import zipfile
from pathlib import Path

import pytest

from treegrpo.plugins import SERVICES
from treegrpo.runner import example, example_names, load_run_file
from treegrpo_learner.sft._demo import DEMO_SFT, DEMO_SIZE, fingerprint
from treegrpo_learner.sft.config import SftConfig

pytestmark = pytest.mark.timeout(300)

ROOT = Path(__file__).resolve().parents[2]
HEAVY = ("torch", "transformers", "peft", "pandas", "sklearn", "scikit_learn", "scipy", "tokenizers")
# what `treegrpo demo` reads before its first SFT step, from the installed packages
CHECK = """
import json
import treegrpo
import treegrpo_learner
from treegrpo.prompts import builtin_templates, render_prompt
from treegrpo.runner import load_run_file
from treegrpo.runner._examples import example, example_names, resolve_run_file
from treegrpo_learner.sft._corpus import corpus_dir, load_corpus
from treegrpo_learner.sft._demo import DEMO_SFT, DEMO_SIZE, fingerprint
from treegrpo_learner.sft.config import SftConfig

print(json.dumps({
    "package": treegrpo.__file__, "learner": treegrpo_learner.__file__, "examples": example_names(),
    "demo": load_run_file(resolve_run_file(example("demo"))).spec().model_dump(mode="json"),
    "run_small": load_run_file(resolve_run_file("run-small")).spec().model_dump(mode="json"),
    "corpus": str(corpus_dir()), "scripts": [s.file.is_file() for s in load_corpus()],
    "templates": [t.name for t in builtin_templates()],
    "fingerprint": fingerprint(SftConfig(**DEMO_SFT), DEMO_SIZE),
    "prompt": render_prompt("draft", "Predict the author.", "input/")[1]["content"]}))
"""


def _run(argv: list[str], cwd: Path, env: dict[str, str] | None = None) -> str:
    done = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=150)
    assert done.returncode == 0, f"{argv[:4]}: {done.stdout[-2000:]}{done.stderr[-3000:]}"
    return done.stdout


def _build_wheels(tmp: Path) -> dict[str, Path]:
    """Wheel per distribution, each built from a copy (the checkout gets no build/ or egg-info)."""
    skip = shutil.ignore_patterns("__pycache__", "*.egg-info", "build")
    sources = {"treegrpo": tmp / "src" / "treegrpo"}
    sources["treegrpo"].mkdir(parents=True)
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, sources["treegrpo"] / name)
    shutil.copytree(ROOT / "treegrpo", sources["treegrpo"] / "treegrpo", ignore=skip)
    for name in SERVICES:
        sources[name] = tmp / "src" / name
        shutil.copytree(ROOT / "services" / name, sources[name], ignore=skip)
    dist = tmp / "dist"
    pip = [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", str(dist)]
    _run([*pip, *map(str, sources.values())], tmp)
    wheels = {"treegrpo": next(dist.glob("treegrpo-0*.whl"))}
    wheels |= {name: next(dist.glob(f"treegrpo_{name}-*.whl")) for name in SERVICES}
    return wheels


def _deps_folder(dest: Path, leave_out: tuple[str, ...]) -> Path:
    """Links to this environment's third-party packages, minus treegrpo's own and `leave_out`."""
    dest.mkdir()
    for entry in Path(sysconfig.get_paths()["purelib"]).iterdir():
        low = entry.name.lower()
        if low.startswith(("treegrpo", "__editable__", "_treegrpo")) or low.endswith(".pth"):
            continue
        if any(low == h or low.startswith((f"{h}-", f"{h}.", f"{h}_")) for h in leave_out):
            continue
        (dest / entry.name).symlink_to(entry)
    return dest


def _venv(tmp: Path, name: str, wheels: list[Path], leave_out: tuple[str, ...] = ()) -> Path:
    venv = tmp / name
    _run([sys.executable, "-m", "venv", "--without-pip", str(venv)], tmp)
    py = str(venv / "bin" / "python")
    _run(
        [
            sys.executable,
            "-m",
            "pip",
            "--python",
            py,
            "install",
            "-q",
            "--no-deps",
            "--no-index",
            *map(str, wheels),
        ],
        tmp,
    )
    site = Path(_run([py, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], tmp).strip())
    (site / "_deps.pth").write_text(str(_deps_folder(tmp / f"{name}-deps", leave_out)) + "\n")
    return venv / "bin"


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> dict:
    tmp = tmp_path_factory.mktemp("wheels")
    wheels = _build_wheels(tmp)
    outside = tmp / "elsewhere"
    outside.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    env["TREEGRPO_HOME"] = str(outside / "home")
    full = _venv(tmp, "full", list(wheels.values()))
    executor_only = _venv(tmp, "executor", [wheels["treegrpo"], wheels["executor"]], leave_out=HEAVY)
    return {"full": full, "executor": executor_only, "env": env, "outside": outside, "wheels": wheels}


def test_five_wheels_are_built_one_per_distribution(installed):
    assert {p.name.split("-")[0] for p in installed["wheels"].values()} == {
        "treegrpo",
        *(f"treegrpo_{n}" for n in SERVICES),
    }


def test_only_the_learners_wheel_carries_the_sft_corpus(installed):
    def corpus_files(wheel: Path) -> list[str]:
        with zipfile.ZipFile(wheel) as z:
            return [n for n in z.namelist() if "/corpus/" in n]

    assert len(corpus_files(installed["wheels"]["learner"])) == 114  # 113 scripts + the manifest
    for name in ("treegrpo", "sampler", "executor", "grader"):
        assert corpus_files(installed["wheels"][name]) == [], name


def test_the_installed_cli_serves_every_service_outside_the_checkout(installed):
    bin_dir, env, outside = installed["full"], installed["env"], installed["outside"]
    out = _run([str(bin_dir / "treegrpo"), "demo", "--help"], outside, env)
    assert "--config" in out and "--control" in out
    for name in SERVICES:
        assert "--config" in _run([str(bin_dir / "treegrpo"), "serve", name, "--help"], outside, env)
    assert "--corpus" in _run([str(bin_dir / "treegrpo"), "sft", "--help"], outside, env)  # an entry point


def test_the_installed_packages_find_their_configs_templates_and_corpus(installed):
    bin_dir, env, outside = installed["full"], installed["env"], installed["outside"]
    found = json.loads(_run([str(bin_dir / "python"), "-c", CHECK], outside, env))
    package = Path(found["package"]).parent
    # the wheel is the treegrpo that ran, not this checkout
    assert package.is_relative_to(bin_dir.parent) and not package.is_relative_to(ROOT)
    assert Path(found["corpus"]).is_relative_to(Path(found["learner"]).parent)  # the learner's data
    assert found["examples"] == example_names() and "run-small" in found["examples"]
    assert found["demo"] == load_run_file(example("demo")).spec().model_dump(mode="json")
    assert found["run_small"] == load_run_file(example("run-small")).spec().model_dump(mode="json")
    assert len(found["scripts"]) == 113 and all(found["scripts"])
    assert found["templates"] == ["_instructions.md", "debug.md", "draft.md", "improve.md", "system.md"]
    # the demo policy's cache key covers the corpus and the templates, byte for byte
    assert found["fingerprint"] == fingerprint(SftConfig(**DEMO_SFT), DEMO_SIZE)
    assert "Predict the author." in found["prompt"]


def test_the_installed_report_writes_the_checkouts_explorer_page_from_its_package_data(installed):
    from treegrpo.report._html import render

    bin_dir, env, outside = installed["full"], installed["env"], installed["outside"]
    doc = {"title": "t", "fields": ["id"], "runs": [], "texts": [""], "curves": {}}
    code = f"import sys; from treegrpo.report._html import render; sys.stdout.write(render({doc!r}))"
    page = _run([str(bin_dir / "python"), "-c", code], outside, env)
    assert page == render(doc)  # the page, its script and every vendored library and licence shipped


def test_a_missing_service_is_named_with_the_distribution_to_install(installed):
    bin_dir, env, outside = installed["executor"], installed["env"], installed["outside"]
    done = subprocess.run(
        [str(bin_dir / "treegrpo"), "serve", "learner"], cwd=outside, env=env, capture_output=True, text=True
    )
    assert done.returncode == 2
    assert "the learner service is not installed: pip install ./services/learner" in done.stdout + done.stderr


def test_the_core_and_the_executor_alone_serve_the_executor_without_torch(installed, nats_server, tmp_path):
    bin_dir, env, outside = installed["executor"], installed["env"], installed["outside"]
    code = "import torch"  # the executor-only environment really has no torch to import
    assert subprocess.run([str(bin_dir / "python"), "-c", code], env=env, capture_output=True).returncode == 1
    beat = tmp_path / "executor.json"
    env = {
        **env,
        "TREEGRPO_EXECUTOR_NATS__URL": nats_server.url,
        "TREEGRPO_EXECUTOR_HEALTH__FILE": str(beat),
        "TREEGRPO_EXECUTOR_HEALTH__INTERVAL_S": "0.2",
    }
    proc = subprocess.Popen(
        [str(bin_dir / "treegrpo"), "serve", "executor"],
        cwd=outside,
        env=env,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        ready = [
            str(bin_dir / "treegrpo"),
            "health",
            "--heartbeat",
            "--ready",
            "--file",
            str(beat),
            "--url",
            nats_server.url,
        ]
        deadline = time.monotonic() + 60
        while subprocess.run(ready, cwd=outside, env=env, capture_output=True).returncode != 0:
            assert proc.poll() is None, proc.stderr.read()[-3000:]
            assert time.monotonic() < deadline, "the executor never turned ready"
            time.sleep(0.5)
    finally:
        proc.send_signal(signal.SIGTERM)
        err = proc.communicate(timeout=30)[1]
    assert proc.returncode == 0, err[-3000:]
