"""The service configs the runner writes are TOML that reads back to what it was given, with unset
(None) values left out so each service takes its default.

Imports a private module: `treegrpo.runner._toml` (what these tests exercise is not on the package's
public surface).
"""

from __future__ import annotations

import tomllib

import pytest

from treegrpo.runner._toml import dump_toml


def test_configs_read_back_without_their_unset_values():
    data = {
        "model": "m",
        "seed": None,
        "n": 3,
        "rate": 0.5,
        "on": True,
        "key with space": 1,
        "grpc": {"port": 5, "host": "127.0.0.1", "tls": None},
        "endpoints": ["a:1", "b:2"],
        "shaping": [{"status": "crashed", "penalty": -0.5, "note": None}],
        "deep": {"a": {"b": {"text": 'quote " newline \n tab \t ünï'}}},
    }
    back = tomllib.loads(dump_toml(data))
    assert back == {
        "model": "m",
        "n": 3,
        "rate": 0.5,
        "on": True,
        "key with space": 1,
        "grpc": {"port": 5, "host": "127.0.0.1"},
        "endpoints": ["a:1", "b:2"],
        "shaping": [{"status": "crashed", "penalty": -0.5}],
        "deep": data["deep"],
    }


def test_a_value_toml_cannot_hold_is_an_error_not_a_silent_drop():
    with pytest.raises(TypeError):
        dump_toml({"ports": [1, None]})
