"""ServiceSettings: what every service's config repeats (the run it serves, the bus, traces, heartbeat).

Each service's config class extends it and sets its own `env_prefix`; `treegrpo.service.Service`
reads these fields directly (no fallbacks), so a service config without them cannot be served.
"""

from __future__ import annotations

from pydantic import Field, field_validator

from treegrpo.config._base import HealthSettings, NatsSettings, Settings, TelemetrySettings
from treegrpo.events import check_token


class ServiceSettings(Settings):
    """Base of the sampler, executor, grader and learner configs (and of any other `Service`)."""

    run_id: str = Field(default="", description="Serve only this run (its own durable consumer, filtered to "
                                                "its subjects); empty = every run")
    nats: NatsSettings = Field(default_factory=NatsSettings, description="Where the bus is")
    telemetry: TelemetrySettings = Field(default_factory=TelemetrySettings, description="Traces")
    health: HealthSettings = Field(default_factory=HealthSettings,
                                   description="Heartbeat file for the probes")

    @field_validator("run_id")
    @classmethod
    def _run_id_is_token(cls, v: str) -> str:
        # it names a durable consumer and filters subjects: a '.' or '*' would widen the filter
        return check_token(v, "run_id") if v else v
