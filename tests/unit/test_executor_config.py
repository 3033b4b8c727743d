"""ExecutorConfig: defaults, env overrides with the TREEGRPO_EXECUTOR_ prefix, strictness."""

from __future__ import annotations

import pytest

from treegrpo.config import ConfigError, load
from treegrpo_executor import ExecutorConfig
from treegrpo_executor.service import ExecutorService


def test_defaults_match_the_seed_gate():
    cfg = ExecutorConfig()
    assert (cfg.gate.gpu.lo, cfg.gate.gpu.hi) == (1, 1)
    assert cfg.backend == "local" and cfg.max_concurrency >= 1
    assert ExecutorService.config_cls is ExecutorConfig


def test_zero_slots_means_one_per_core(monkeypatch):
    monkeypatch.setattr("os.cpu_count", lambda: 16)
    assert load(ExecutorConfig, None, {"max_concurrency": 0}).max_concurrency == 16
    assert load(ExecutorConfig, None, {"max_concurrency": 3}).max_concurrency == 3


def test_env_overrides_use_the_prefix_and_nested_delimiter(monkeypatch):
    monkeypatch.setenv("TREEGRPO_EXECUTOR_MAX_CONCURRENCY", "7")
    monkeypatch.setenv("TREEGRPO_EXECUTOR_GATE__GPU__LO", "1")
    monkeypatch.setenv("TREEGRPO_EXECUTOR_GATE__GPU__HI", "4")
    monkeypatch.setenv("TREEGRPO_EXECUTOR_PUBLIC_DATA_ROOTS", '["/a", "/b"]')
    cfg = load(ExecutorConfig, None, {"timeout_s": 60})
    assert (cfg.max_concurrency, cfg.gate.gpu.hi, cfg.public_data_roots, cfg.timeout_s) == (
        7,
        4,
        ["/a", "/b"],
        60,
    )


def test_unknown_keys_and_empty_ranges_are_config_errors():
    with pytest.raises(ConfigError, match="no_such_key"):
        load(ExecutorConfig, None, {"no_such_key": 1})
    with pytest.raises(ConfigError, match="empty"):
        load(ExecutorConfig, None, {"gate": {"cpu": {"lo": 4, "hi": 2}}})
