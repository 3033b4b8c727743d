"""The run file: one TOML with the RunSpec and each service's settings.

    [run]        # RunSpec: tasks, rounds, tree shape, train, max_staleness, ...
    [runner]     # RunnerSettings below
    [sampler]    # SamplerConfig fields
    [executor]   # ExecutorConfig fields
    [grader]     # GraderConfig fields
    [learner]    # LearnerConfig fields

Each service section is typed by that service's own config class (its `treegrpo.configs` entry
point, `treegrpo/plugins.py`; sections of services not installed here are checked where they
run), so `load_run_file` rejects a misspelt `[sampler]` key naming it. A section stays partial:
the keys the file sets; defaults and the service's environment resolve in the service's own
process, where the runner validates the wired config again before starting it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from treegrpo._topology import SERVICES
from treegrpo.config import (
    ConfigError,
    RunSpec,
    Section,
    ServiceSettings,
    describe_errors,
    from_values,
    load,
    parse_overrides,
    read_toml,
)
from treegrpo.plugins import installed_services


class RunnerSettings(Section):
    nats_url: str = Field(
        default="",
        description="Use this NATS instead of the embedded server (or the one `treegrpo nats up` runs)",
    )
    stream_replicas: int = Field(
        default=1,
        ge=1,
        le=5,
        description=(
            "JetStream replicas of the stream and buckets the runner creates, and of every service it "
            "starts (one count for the whole deployment; 3 on a three-server cluster)"
        ),
    )
    out_dir: str = Field(
        default="", description="Where the export and report go; empty = $TREEGRPO_HOME/runs/<run_id>"
    )
    attach: bool = Field(
        default=False,
        description=(
            "Services are already running (compose, Kubernetes): "
            "only publish run.started, follow, export, report"
        ),
    )
    restart_services: bool = Field(
        default=True, description="Restart a service process that died (crash or kill)"
    )
    max_restarts: int = Field(default=50, ge=0, description="Per service, then the run fails")
    stop_grace_s: float = Field(default=20.0, gt=0, description="SIGTERM, then SIGKILL after this long")
    stuck_after_s: float = Field(
        default=300.0,
        ge=0,
        description=(
            "Kill and restart a service whose heartbeat (event or consumer loop) is older than this; "
            "0 = never"
        ),
    )
    timeout_s: float = Field(default=0.0, ge=0, description="Fail the run after this long (0 = no limit)")
    learner_idle_s: float = Field(
        default=120.0,
        gt=0,
        description="After the last round, wait this long for a learner step before finishing anyway",
    )
    export: bool = Field(default=True, description="Write the seed-format data root at the end")
    report: bool = Field(default=True, description="Write the report (Markdown + plots) at the end")
    min_free_mb: float = Field(
        default=500.0,
        ge=0,
        description=(
            "Warn in the progress view when $TREEGRPO_HOME or the NATS store has less free space than this"
        ),
    )
    bus_wait_s: float = Field(
        default=120.0,
        ge=0,
        description=(
            "How long the run waits for the bus to take writes again (a full disk freed, NATS back) "
            "before it stops, resumable, naming the cause; 0 = wait (up to timeout_s)"
        ),
    )
    live: bool = Field(default=True, description="Live progress display (off: one line per round)")


class RunFile(BaseModel):
    """A run file's tables. Unknown tables are an error; `load_run_file` types every section."""

    model_config = ConfigDict(extra="forbid")
    run: dict[str, Any] = Field(default_factory=dict, description="RunSpec fields (`spec()`)")
    runner: RunnerSettings = Field(default_factory=RunnerSettings, description="How `treegrpo run` runs it")
    services: dict[str, dict[str, Any]] = Field(
        default_factory=dict, description="The [sampler], [executor], [grader], [learner] tables, by name"
    )

    @model_validator(mode="before")
    @classmethod
    def _gather_service_tables(cls, data: Any) -> Any:
        # the tables are named by the services, so the file keeps its flat [sampler] form
        if isinstance(data, dict) and "services" not in data:
            data = dict(data)
            data["services"] = {n: data.pop(n) for n in SERVICES if n in data}
        return data

    def spec(self) -> RunSpec:
        """The [run] table as a RunSpec (TREEGRPO_RUN_* applied above it)."""
        return load(RunSpec, None, self.run, where="[run]")

    def service(self, name: str) -> ServiceSettings:
        """The [name] section as the service's config class reads it; `model_fields_set` = the keys
        the file sets. ConfigError naming the section and the field."""
        from treegrpo.plugins import config_class

        return from_values(config_class(name), self.section(name), f"[{name}]")

    def section(self, name: str) -> dict[str, Any]:
        """The [name] section as written (a partial config)."""
        return dict(self.services.get(name, {}))


def deep_merge(base: dict, extra: dict) -> dict:
    out = dict(base)
    for k, v in extra.items():
        out[k] = deep_merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def load_run_file(path: str | Path | None, overrides: list[str] | None = None) -> RunFile:
    """The run file plus `--set section.key=value` overrides, every table typed: [run] by the
    RunSpec, [runner] by RunnerSettings, each service's by its config class. A ConfigError names
    the file, the table and the field."""
    where = str(path or "run config")
    data = deep_merge(read_toml(path) if path else {}, parse_overrides(overrides or []))
    try:
        rf = RunFile.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(f"{where}: {describe_errors(exc)}") from exc
    try:
        rf.spec()
        for name in installed_services():
            rf.service(name)
    except ConfigError as exc:
        raise ConfigError(f"{where}: {exc}") from exc
    return rf
