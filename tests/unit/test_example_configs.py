"""Every shipped example config (configs/, deploy/) parses with the config classes that will read it."""

from __future__ import annotations

from pathlib import Path

import pytest

from treegrpo.config import load, read_toml
from treegrpo.plugins import SERVICES, service_class
from treegrpo.runner import examples_dir, load_run_file

ROOT = Path(__file__).resolve().parents[2]
CONFIGS = sorted([*examples_dir().glob("**/*.toml"), *(ROOT / "deploy").glob("**/*.toml")])


def _service_for(path: Path) -> str | None:
    for name in SERVICES:
        if name in path.stem.split("-") or path.parent.name == name:
            return name
    return None


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.name)
def test_example_config_parses(path):
    data = read_toml(path)
    if "run" in data or "runner" in data:
        rf = load_run_file(path)  # types every service section: a misspelt key fails here
        for name in SERVICES:
            typed = rf.service(name)
            assert isinstance(typed, service_class(name).config_cls)
            assert typed.model_fields_set == set(data.get(name, {}))  # what the file says, nothing dropped
            load(service_class(name).config_cls, None, rf.section(name))  # and as the service builds it
        return
    name = _service_for(path)
    assert name, (
        f"{path.name}: name it after its service (e.g. deploy-executor.toml) or give it a [run] table"
    )
    load(service_class(name).config_cls, path)


def test_there_are_example_configs_of_runs_and_of_each_deployed_service():
    assert len(CONFIGS) >= 3
    assert {p.stem for p in CONFIGS if p.parent.name == "config"} >= set(SERVICES)  # deploy/k8s
