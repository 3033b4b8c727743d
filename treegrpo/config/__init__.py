"""Typed configuration: one pydantic-settings model per service plus the RunSpec."""

from treegrpo.config._base import (
    ConfigError,
    HealthSettings,
    NatsSettings,
    Section,
    Settings,
    TelemetrySettings,
    load,
    parse_overrides,
    read_toml,
    treegrpo_home,
)
from treegrpo.config.run import RunSpec, TreeSettings

__all__ = ["ConfigError", "HealthSettings", "NatsSettings", "RunSpec", "Section", "Settings", "TelemetrySettings",
           "TreeSettings", "load", "parse_overrides", "read_toml", "treegrpo_home"]
