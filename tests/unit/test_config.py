"""Config precedence and errors: defaults < TOML < env < CLI; bad input names field and reason."""

from __future__ import annotations

from pathlib import Path

import pytest

from treegrpo.config import ConfigError, RunSpec, load, parse_overrides

ROOT = Path(__file__).resolve().parents[2]


def test_precedence_is_defaults_then_toml_then_env_then_cli(tmp_path, monkeypatch):
    f = tmp_path / "run.toml"
    f.write_text('rounds = 3\nseed = 7\ntasks = ["a"]\n[tree]\ngroup_size = 4\n')
    monkeypatch.setenv("TREEGRPO_RUN_SEED", "8")
    monkeypatch.setenv("TREEGRPO_RUN_ROUNDS", "5")
    spec = load(RunSpec, f, parse_overrides(["rounds=6", "tree.expansions=2"]))
    assert spec.rounds == 6            # CLI beats env and TOML
    assert spec.seed == 8              # env beats TOML
    assert spec.tree.group_size == 4   # TOML beats default, merged with a CLI override of a sibling
    assert spec.tree.expansions == 2
    assert spec.tree.drafts == 2       # default


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
        "a": 1, "b": {"c": True}, "d": "hello", "e": [1, 2]}
    with pytest.raises(ConfigError):
        parse_overrides(["novalue"])


def test_every_field_of_the_run_spec_is_documented():
    assert all(f.description for f in RunSpec.model_fields.values())
