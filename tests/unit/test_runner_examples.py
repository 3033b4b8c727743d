"""`treegrpo run NAME`: a run file is a path, or the name of an example shipped in the package."""

from __future__ import annotations

from pathlib import Path

import pytest

from treegrpo.config import ConfigError
from treegrpo.runner import example, load_run_file, resolve_run_file

pytestmark = pytest.mark.timeout(30)


def test_a_bare_name_is_the_shipped_example(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert resolve_run_file("run-small") == resolve_run_file("run-small.toml") == example("run-small")
    assert example("run-small").is_file() and load_run_file(resolve_run_file("demo")).spec().train


def test_a_file_that_exists_wins_over_an_example_of_its_name(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    Path("run-small.toml").write_text("[run]\nrounds = 7\n")
    assert resolve_run_file("run-small.toml") == Path("run-small.toml")
    assert load_run_file(resolve_run_file("run-small.toml")).spec().rounds == 7


def test_an_unknown_name_or_a_missing_path_is_a_config_error(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for missing in ("no-such-example", "sub/run-small.toml"):
        with pytest.raises(ConfigError, match="no such config file"):
            load_run_file(resolve_run_file(missing))
