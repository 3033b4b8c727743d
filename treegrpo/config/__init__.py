"""Typed configuration: one pydantic-settings model per service (on the shared
`ServiceSettings`) plus the RunSpec."""

from treegrpo.config._base import (
    ConfigError,
    HealthSettings,
    InfraSettings,
    NatsSettings,
    Section,
    ServiceSettings,
    Settings,
    TelemetrySettings,
    describe_errors,
    from_values,
    load,
    parse_overrides,
    read_toml,
    treegrpo_home,
)
from treegrpo.config.run import RespendSettings, RunSpec, TreeSettings

__all__ = [
    "ConfigError",
    "HealthSettings",
    "InfraSettings",
    "NatsSettings",
    "RespendSettings",
    "RunSpec",
    "Section",
    "ServiceSettings",
    "Settings",
    "TelemetrySettings",
    "TreeSettings",
    "describe_errors",
    "from_values",
    "load",
    "parse_overrides",
    "read_toml",
    "treegrpo_home",
]
