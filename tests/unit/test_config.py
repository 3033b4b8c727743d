"""Config precedence and errors: defaults < TOML < env < CLI; bad input names field and reason."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import BaseModel, ValidationError

from treegrpo.config import ConfigError, RunSpec, ServiceSettings, load, parse_overrides
from treegrpo.plugins import SERVICES, service_class

ROOT = Path(__file__).resolve().parents[2]


def test_precedence_is_defaults_then_toml_then_env_then_cli(tmp_path, monkeypatch):
    f = tmp_path / "run.toml"
    f.write_text('rounds = 3\nseed = 7\ntasks = ["a"]\n[tree]\ngroup_size = 4\n')
    monkeypatch.setenv("TREEGRPO_RUN_SEED", "8")
    monkeypatch.setenv("TREEGRPO_RUN_ROUNDS", "5")
    spec = load(RunSpec, f, parse_overrides(["rounds=6", "tree.expansions=2"]))
    assert spec.rounds == 6  # CLI beats env and TOML
    assert spec.seed == 8  # env beats TOML
    assert spec.tree.group_size == 4  # TOML beats default, merged with a CLI override of a sibling
    assert spec.tree.expansions == 2
    assert spec.tree.drafts == 2  # default


def test_unknown_key_in_a_file_is_an_error_naming_it(tmp_path):
    f = tmp_path / "run.toml"
    f.write_text("[tree]\ngroup_sise = 4\n")
    with pytest.raises(ConfigError, match=r"tree\.group_sise.*Extra inputs"):
        load(RunSpec, f)


def test_invalid_value_names_the_field_and_the_reason(tmp_path):
    f = tmp_path / "run.toml"
    f.write_text("rounds = 0\n")
    with pytest.raises(ConfigError, match=r"'rounds'.*greater than or equal to 1"):
        load(RunSpec, f)


def test_broken_toml_and_missing_file_are_clear_errors(tmp_path):
    f = tmp_path / "bad.toml"
    f.write_text("rounds = = 3\n")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load(RunSpec, f)
    with pytest.raises(ConfigError, match="no such config file"):
        load(RunSpec, tmp_path / "absent.toml")


def test_overrides_parse_toml_scalars_and_nested_keys():
    assert parse_overrides(["a=1", "b.c=true", "d=hello", "e=[1, 2]"]) == {
        "a": 1,
        "b": {"c": True},
        "d": "hello",
        "e": [1, 2],
    }
    with pytest.raises(ConfigError):
        parse_overrides(["novalue"])


def test_every_field_of_the_run_spec_is_documented():
    assert all(f.description for f in RunSpec.model_fields.values())


def test_a_recorded_run_spec_reads_back_ignoring_retired_keys_and_the_readers_environment(monkeypatch):
    # runs recorded before RunSpec lost `nats`/`telemetry` carry them in run.started: the log is immutable
    recorded = json.dumps(
        {
            "run_id": "r1",
            "tasks": ["a"],
            "rounds": 3,
            "seed": 2,
            "nats": {"url": "nats://x:1"},
            "telemetry": {"enabled": True},
        }
    )
    monkeypatch.setenv("TREEGRPO_RUN_SEED", "9")  # a reader's setting is no fact of a past run
    spec = RunSpec.from_json(recorded)
    assert (spec.run_id, spec.tasks, spec.rounds, spec.seed) == ("r1", ["a"], 3, 2)
    assert type(spec) is RunSpec and RunSpec.from_json(spec.model_dump_json()) == spec
    with pytest.raises(ValueError, match=r"field 'rounds'"):
        RunSpec.from_json(json.dumps({"rounds": 0}))


def test_the_run_spec_has_no_bus_or_trace_settings():
    assert not {"nats", "telemetry"} & set(RunSpec.model_fields)
    with pytest.raises(ValidationError, match="nats"):
        RunSpec(nats={"url": "nats://x:1"})


def _sections(model: type[BaseModel]):
    yield model
    for f in model.model_fields.values():
        if isinstance(f.annotation, type) and issubclass(f.annotation, BaseModel):
            yield from _sections(f.annotation)


@pytest.mark.parametrize("name", sorted(SERVICES))
def test_every_service_config_extends_the_shared_base_forbids_unknown_keys_and_documents_every_field(name):
    cls = service_class(name).config_cls
    assert issubclass(cls, ServiceSettings) and cls.model_config["env_prefix"] == f"TREEGRPO_{name.upper()}_"
    for model in _sections(cls):
        assert model.model_config["extra"] == "forbid", model.__name__
        undocumented = [k for k, f in model.model_fields.items() if not f.description]
        assert not undocumented, f"{model.__name__}: {undocumented}"


def test_the_shared_settings_come_from_env_toml_and_overrides_in_order(tmp_path, monkeypatch):
    f = tmp_path / "grader.toml"
    f.write_text(
        'run_id = "r1"\n[nats]\nurl = "nats://file:1"\nconnect_timeout_s = 3\n[health]\ninterval_s = 2\n'
    )
    monkeypatch.setenv("TREEGRPO_GRADER_NATS__URL", "nats://env:2")
    cfg = load(service_class("grader").config_cls, f, parse_overrides(["health.interval_s=1"]))
    got = (cfg.run_id, cfg.nats.url, cfg.nats.connect_timeout_s, cfg.health.interval_s)
    assert got == ("r1", "nats://env:2", 3, 1)  # file < env < override, field by field
    with pytest.raises(ConfigError, match=r"'run_id'.*must match"):
        load(service_class("grader").config_cls, None, {"run_id": "a.b"})  # it filters subjects: no wildcards


def test_a_service_refuses_a_config_of_another_class():
    from treegrpo.service import Service

    class Probe(Service):
        config_cls = service_class("grader").config_cls

    with pytest.raises(TypeError, match="needs a GraderConfig"):
        Probe(ServiceSettings())
