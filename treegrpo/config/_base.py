"""Typed settings: defaults in the schema < TOML file < environment < CLI overrides.

Every service config subclasses `ServiceSettings` (a `Settings` with what all services share).
`load(cls, path, overrides)` is the one way to build one; a bad file names the field and the
reason (`ConfigError`). `from_values(cls, data)` checks
values alone (no environment, no file): a recorded config, or one section of a run file.
"""

from __future__ import annotations

import os
import tomllib
from functools import cache
from pathlib import Path
from typing import Any, ClassVar, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from treegrpo.events import check_token


class ConfigError(ValueError):
    """A config file or override is invalid; the message names the field and why."""


class Section(BaseModel):
    """A nested block of settings; unknown keys are an error, as at the top level."""

    model_config = ConfigDict(extra="forbid")


class NatsSettings(Section):
    url: str = Field(
        default="",
        description="NATS URL; empty means $TREEGRPO_NATS_URL, then the embedded server under $TREEGRPO_HOME",
    )
    connect_timeout_s: float = Field(
        default=10.0, gt=0, description="Give up connecting after this long, with a clear error"
    )
    drain_timeout_s: float = Field(
        default=10.0, gt=0, description="On SIGTERM, drain the connection within this long, then close"
    )
    stream_replicas: int = Field(
        default=1,
        ge=1,
        le=5,
        description="JetStream replicas for the stream and buckets (3 on a prod cluster)",
    )


class TelemetrySettings(Section):
    otlp_endpoint: str = Field(
        default="",
        description="OTLP/HTTP traces endpoint, e.g. http://otel-collector:4318; empty disables OTLP export",
    )
    jsonl_path: str = Field(
        default="",
        description=(
            "Also append finished spans to this file as OTLP/JSON lines (the collector's file format)"
        ),
    )
    enabled: bool = Field(default=True, description="Create spans at all")


class HealthSettings(Section):
    file: str = Field(
        default="",
        description=(
            "Heartbeat file the probes read; empty = $TREEGRPO_HOME/health/<service>.json "
            "(set one per instance when several share a home)"
        ),
    )
    interval_s: float = Field(
        default=5.0, gt=0, description="Rewrite the heartbeat this often; a blocked event loop stops it"
    )
    enabled: bool = Field(default=True, description="Write the heartbeat at all")


class InfraSettings(Section):
    """When a node fails on our side (treegrpo/fault_policy.py): retry it, then mask it, and stop the run
    when nothing works at all. Used by the executor and the grader."""

    attempts: int = Field(
        default=3,
        ge=1,
        le=9,
        description="Attempts at a node that fails on our side before it is recorded as an "
        "infrastructure fault and masked out of its group (at most 9: the bus dead-letters at 10)",
    )
    retry_s: float = Field(default=1.0, gt=0, description="Delay before the next attempt")
    fail_after: int = Field(
        default=3,
        ge=0,
        description="Nodes in a row recorded as infrastructure faults, none done between: the "
        "service can do nothing and stops the run with the reason (0 = never)",
    )


class _TomlSource(PydanticBaseSettingsSource):
    def __init__(self, settings_cls: type[BaseSettings], data: dict[str, Any]):
        super().__init__(settings_cls)
        self._data = data

    def get_field_value(self, field, field_name):  # pragma: no cover - required by the ABC
        return self._data.get(field_name), field_name, False

    def __call__(self) -> dict[str, Any]:
        return dict(self._data)


class Settings(BaseSettings):
    """Base of every config. Subclasses set `env_prefix` (e.g. TREEGRPO_EXECUTOR_)."""

    model_config = SettingsConfigDict(extra="forbid", env_nested_delimiter="__", validate_default=True)
    _toml_data: ClassVar[dict[str, Any]] = {}
    _read_env: ClassVar[bool] = True

    @classmethod
    def settings_customise_sources(
        cls, settings_cls, init_settings, env_settings, dotenv_settings, file_secret_settings
    ):
        # init kwargs are the CLI overrides: highest precedence, then env, then the TOML file.
        if not cls._read_env:
            return (init_settings,)
        return (init_settings, env_settings, _TomlSource(settings_cls, cls._toml_data))


class ServiceSettings(Settings):
    """What every service's config repeats: the run it serves, the bus, traces, heartbeat. Base of
    the sampler, executor, grader and learner configs; `treegrpo.service.Service` reads these
    fields directly."""

    run_id: str = Field(
        default="",
        description="Serve only this run (its own durable consumer, filtered to "
        "its subjects); empty = every run",
    )
    nats: NatsSettings = Field(default_factory=NatsSettings, description="Where the bus is")
    telemetry: TelemetrySettings = Field(default_factory=TelemetrySettings, description="Traces")
    health: HealthSettings = Field(
        default_factory=HealthSettings, description="Heartbeat file for the probes"
    )

    @field_validator("run_id")
    @classmethod
    def _run_id_is_token(cls, v: str) -> str:
        # it names a durable consumer and filters subjects: a '.' or '*' would widen the filter
        return check_token(v, "run_id") if v else v


T = TypeVar("T", bound=Settings)


def read_toml(path: str | Path, section: str | None = None) -> dict[str, Any]:
    p = Path(path)
    try:
        data = tomllib.loads(p.read_text())
    except FileNotFoundError as exc:
        raise ConfigError(f"{p}: no such config file") from exc
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{p}: not valid TOML: {exc}") from exc
    if section is not None:
        data = data.get(section, {})
        if not isinstance(data, dict):
            raise ConfigError(f"{p}: [{section}] must be a table")
    return data


def parse_overrides(pairs: list[str]) -> dict[str, Any]:
    """`a.b=1` style CLI overrides into a nested dict; values parsed as TOML scalars when they can be."""
    out: dict[str, Any] = {}
    for pair in pairs:
        if "=" not in pair:
            raise ConfigError(f"override {pair!r} must look like key=value")
        key, raw = pair.split("=", 1)
        try:
            value = tomllib.loads(f"v = {raw}")["v"]
        except tomllib.TOMLDecodeError:
            value = raw
        node = out
        *parents, leaf = key.strip().split(".")
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = value
    return out


def load(
    cls: type[T],
    path: str | Path | None = None,
    overrides: dict[str, Any] | None = None,
    section: str | None = None,
    where: str = "",
) -> T:
    """Build `cls` from defaults < TOML (optionally one [section]) < env < overrides. A ConfigError
    starts with `where` (default: the file, else "config")."""
    data = read_toml(path, section) if path else {}
    holder = type(cls.__name__, (cls,), {"_toml_data": data})
    try:
        made = holder(**(overrides or {}))
    except ValidationError as exc:
        raise ConfigError(f"{where or path or 'config'}: {describe_errors(exc)}") from exc
    return cls.model_validate(made.model_dump()) if holder is not cls else made


@cache
def _values_only(cls: type[T]) -> type[T]:
    return type(cls.__name__, (cls,), {"_read_env": False})


def from_values(cls: type[T], data: dict[str, Any], where: str = "config") -> T:
    """`cls` validated from `data` alone: no environment, no TOML (`ConfigError` names the field).
    Its `model_fields_set` is what `data` sets, so a partial config stays partial."""
    try:
        made = _values_only(cls).model_validate(data)
    except ValidationError as exc:
        raise ConfigError(f"{where}: {describe_errors(exc)}") from exc
    return cls.model_construct(_fields_set=made.model_fields_set, **dict(made))


def describe_errors(exc: ValidationError) -> str:
    """One line naming each invalid field and why: `field 'tree.group_size': Input should be ...`."""
    parts = []
    for err in exc.errors():
        loc = ".".join(str(x) for x in err["loc"]) or "<root>"
        parts.append(f"field {loc!r}: {err['msg']}")
    return "; ".join(parts)


def treegrpo_home() -> Path:
    return Path(os.environ.get("TREEGRPO_HOME", Path.home() / ".treegrpo")).expanduser()
