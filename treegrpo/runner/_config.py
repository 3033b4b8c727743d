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
process. The typed sections travel as they are: the runner wires them (`_wiring.wire`) and
dumps each one to the TOML its service reads; no table is merged or validated twice.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
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
    retry_masked: bool = Field(
        default=False,
        description=(
            "On `--resume`: run again the nodes infrastructure faults masked whose group is not yet "
            'scored (`--retry-masked`; docs/DEPLOY.md, "Resuming")'
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


class _Tables(BaseModel):
    """A run file's tables as read: unknown tables are an error (naming them)."""

    model_config = ConfigDict(extra="forbid")
    run: dict[str, Any] = Field(default_factory=dict, description="RunSpec fields (`RunFile.spec()`)")
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


@dataclass(frozen=True)
class RunFile:
    """A run file, typed: the [run] table (a partial RunSpec, resolved by `spec()` with the
    TREEGRPO_RUN_* environment), the runner's settings, and each installed service's section as
    its own config class, partial (`model_fields_set` = the keys the file sets). A section of a
    service not installed here stays as written (`foreign`) and is checked where it runs."""

    run: dict[str, Any] = field(default_factory=dict)
    runner: RunnerSettings = field(default_factory=RunnerSettings)
    services: dict[str, ServiceSettings] = field(default_factory=dict)
    foreign: dict[str, dict[str, Any]] = field(default_factory=dict)

    def spec(self) -> RunSpec:
        """The [run] table as a RunSpec (TREEGRPO_RUN_* applied above it)."""
        return load(RunSpec, None, self.run, where="[run]")

    def service(self, name: str) -> ServiceSettings:
        """The [name] section, typed by the service's config class (NotInstalled if it is not here)."""
        if name in self.services:
            return self.services[name]
        from treegrpo.plugins import config_class

        return from_values(config_class(name), self.foreign.get(name, {}), f"[{name}]")

    def section(self, name: str) -> dict[str, Any]:
        """The [name] section as the file sets it (a partial config, as TOML would hold it)."""
        if name in self.services:
            return self.services[name].model_dump(mode="json", exclude_unset=True)
        return dict(self.foreign.get(name, {}))

    def with_run(self, **values: Any) -> RunFile:
        """This run file with [run] settings replaced (typed values: `train=False`)."""
        return replace(self, run={**self.run, **values})

    def with_runner(self, **values: Any) -> RunFile:
        return replace(self, runner=self.runner.model_copy(update=values))

    def with_service(self, name: str, **values: Any) -> RunFile:
        """This run file with the [name] section's `values` set (they count as the file's own)."""
        cfg = self.service(name).model_copy(update=values)
        return replace(self, services={**self.services, name: cfg})


def _deep_merge(base: dict, extra: dict) -> dict:
    out = dict(base)
    for k, v in extra.items():
        out[k] = _deep_merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def load_run_file(path: str | Path | None, overrides: list[str] | None = None) -> RunFile:
    """The run file plus `--set section.key=value` overrides, every table typed: [run] by the
    RunSpec, [runner] by RunnerSettings, each installed service's by its config class. A
    ConfigError names the file, the table and the field."""
    where = str(path or "run config")
    data = _deep_merge(read_toml(path) if path else {}, parse_overrides(overrides or []))
    try:
        tables = _Tables.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(f"{where}: {describe_errors(exc)}") from exc
    here = installed_services()
    try:
        rf = RunFile(
            run=tables.run,
            runner=tables.runner,
            services={n: _typed(n, tables.services.get(n, {})) for n in here},
            foreign={n: t for n, t in tables.services.items() if n not in here},
        )
        rf.spec()
    except ConfigError as exc:
        raise ConfigError(f"{where}: {exc}") from exc
    return rf


def _typed(name: str, table: dict[str, Any]) -> ServiceSettings:
    from treegrpo.plugins import config_class  # the config module only, never the service

    return from_values(config_class(name), table, f"[{name}]")
