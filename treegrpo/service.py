"""The one service shape: `setup / run / stop`, a flat loop, a dispatch by event type.

A service subclasses `Service`, names its durable consumer and the event kinds it handles, and
maps each kind to an `async def on_<kind>(event, delivery)` method through `handlers()`:

    class Grader(Service):
        name = "grader"
        def handlers(self):
            return {Kind.NODE_EXECUTED: self.on_node_executed}  # the kinds TOPOLOGY routes to it

`serve(service)` runs it under SIGTERM/SIGINT: stop fetching, let in-flight handlers finish,
drain the NATS connection within `nats.drain_timeout_s`.

Runs are scoped: a service whose config names a `run_id` (what `treegrpo run` starts) binds a
durable of its own, `<name>-<run_id>`, filtered to that run's subjects, so two runs on one NATS
never take each other's work; without one (compose, Kubernetes) it serves every run. On a bus that
needs credentials the scoped durable's name ends in a tag only that service can compute (see
`durable_name`), which is how a deployed service keeps its per-run consumers to itself.

A permanent fault (no model, a bad config, no good checkpoint) is not worth a restart: the service
records it in its heartbeat (state "failed") and exits with `EXIT_PERMANENT`, which the runner's
supervisor reads as "stop the run with this reason" rather than "restart".
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import logging
import os
import signal
import socket
import sys
import time
from collections.abc import Awaitable, Callable
from typing import ClassVar
from urllib.parse import unquote, urlparse

from opentelemetry import trace

from treegrpo import events
from treegrpo.bus import Bus, Consumer, ConsumerOptions, Delivery, PermanentError
from treegrpo.config import ConfigError, HealthSettings, NatsSettings, ServiceSettings
from treegrpo.health import Heartbeat, heartbeat_path, write_heartbeat
from treegrpo.nats_url import resolve_nats_url
from treegrpo.telemetry import setup_tracing, shutdown_tracing
from treegrpo.v1 import events_pb2 as pb

log = logging.getLogger(__name__)
HandlerFn = Callable[[pb.Event, Delivery], Awaitable[None]]
EXIT_PERMANENT = 78  # EX_CONFIG: a supervisor must not restart a service that exits with it
# what a failed setup means: nothing a restart changes (a missing model, a bad setting, a missing
# optional package); a NATS that is not up yet (BusUnavailable) stays an ordinary, restartable exit
PERMANENT_SETUP_ERRORS = (
    FileNotFoundError,
    NotADirectoryError,
    PermanentError,
    ConfigError,
    ValueError,
    ImportError,
)


def durable_name(service: str, run_id: str, url: str) -> str:
    """The durable consumer a service binds: `<service>` when it serves every run, `<service>-<run>`
    when it serves one, and on a bus that needs a password `<service>-<run>-<tag>`, the tag an
    HMAC of the run id under the service's own NATS password.

    Why the tag: NATS permissions match whole subject tokens, and a consumer's name is one token of
    the subjects that create, pull from, ack on or delete it, so `grader-<any run>` cannot be
    granted to the grader alone (deploy/k8s/base/nats/accounts.conf). Every service user may drive
    per-run consumers by name; no service can learn another's name (listing consumers is refused
    to them), so none can create, re-filter, pull from, ack on or delete another's. Replicas of a
    service share its password, hence the durable; a changed password starts a new durable that
    replays the run (the handlers are idempotent)."""
    if not run_id:
        return service
    password = unquote(urlparse(url).password or "")
    if not password:
        return f"{service}-{run_id}"
    tag = hmac.new(password.encode(), f"{service}/{run_id}".encode(), hashlib.sha256).hexdigest()[:16]
    return f"{service}-{run_id}-{tag}"


class Service:
    name: str = "service"
    # the pydantic-settings class `treegrpo serve` and the runner build this service's config with
    config_cls: ClassVar[type[ServiceSettings]] = ServiceSettings

    def __init__(self, config: ServiceSettings, instance: str | None = None):
        if not isinstance(config, self.config_cls):
            raise TypeError(
                f"{type(self).__name__} needs a {self.config_cls.__name__}, got {type(config).__name__}"
            )
        self.config = config
        self.instance = instance or f"{socket.gethostname()}-{os.getpid()}"
        self.producer = f"{self.name}/{self.instance}"
        self.bus: Bus | None = None
        self.consumer: Consumer | None = None
        self.tracer: trace.Tracer = trace.get_tracer(self.name)
        self.stopping = asyncio.Event()
        self._state = "starting"  # -> running -> stopped, as the heartbeat reports it
        self._beat_task: asyncio.Task | None = None
        self.failure = ""  # the permanent fault this service stopped on ("" while healthy)
        self.errors = 0  # work failures outside the consumer (e.g. a group the sampler could not sample)
        self.last_error = ""

    # -- what a service declares ---------------------------------------------------------------
    def handlers(self) -> dict[str, HandlerFn]:
        raise NotImplementedError

    def consumer_options(self) -> ConsumerOptions:
        return ConsumerOptions()

    @property
    def run_id(self) -> str:
        """The one run this service serves ('' = every run)."""
        return self.config.run_id

    @property
    def durable(self) -> str:
        return durable_name(self.name, self.run_id, resolve_nats_url(self.nats.url))

    def fail(self, reason: str) -> None:
        """Stop for good on a permanent fault: the heartbeat says why, the exit code says 'do not restart'."""
        if not self.failure:
            log.error("%s: permanent fault, stopping: %s", self.name, reason)
            self.failure = reason
        try:  # the service's own stop(): it may release held work first (the learner's waiting groups)
            asyncio.get_running_loop().create_task(self.stop())
        except RuntimeError:  # no loop: nothing runs that needs telling
            self.stopping.set()

    def note_error(self, reason: str) -> None:
        self.errors += 1
        self.last_error = reason[:300]

    async def on_setup(self) -> None:
        """Hook: open resources (models, sandboxes, servers) after the bus is up."""

    async def on_stop(self) -> None:
        """Hook: release resources after the loop ended."""

    # -- the shape -----------------------------------------------------------------------------
    @property
    def nats(self) -> NatsSettings:
        return self.config.nats

    async def setup(self) -> None:
        logging.getLogger(__name__).info("%s config: %s", self.name, self.config.model_dump_json())
        self.tracer = setup_tracing(self.name, self.config.telemetry)
        self._start_beat()  # from now: loading a model can take minutes, and liveness must see it alive
        url = resolve_nats_url(self.nats.url)
        self.bus = await Bus.connect(
            url, self.producer, self.nats.connect_timeout_s, self.nats.stream_replicas
        )
        await self.bus.ensure()
        filters = [events.subject_filter(kind, self.run_id or "*") for kind in self.handlers()]
        self.consumer = Consumer(
            self.bus, self.durable, filters, self._dispatch, self.consumer_options(), self.tracer, self.name
        )
        await self.on_setup()

    async def _dispatch(self, event: pb.Event, delivery: Delivery) -> None:
        if event.envelope.producer == events.IMPORTED_PRODUCER:
            return  # history read back from an archive is for projections, never work to redo
        handler = self.handlers().get(events.kind_of(event))
        if handler is None:
            raise PermanentError(f"{self.name} has no handler for {events.kind_of(event)}")
        await handler(event, delivery)

    @property
    def health(self) -> HealthSettings:
        return self.config.health

    async def run(self) -> None:
        assert self.consumer is not None, "setup() first"
        self._state = "running"
        try:
            await self.consumer.run(self.stopping, self.nats.drain_timeout_s)
        except PermanentError as exc:  # the bus refused our consumer for good (a JetStream 400)
            self.fail(exc.reason)
        finally:
            await self._stop_beat()

    # -- the heartbeat (treegrpo/health.py says why) -------------------------------------------
    def _start_beat(self) -> None:
        if self.health.enabled and self._beat_task is None:
            self._beat_task = asyncio.create_task(self._beat(), name=f"{self.name}-heartbeat")

    async def _stop_beat(self) -> None:
        if self._beat_task is None:
            return
        self._beat_task.cancel()
        await asyncio.gather(self._beat_task, return_exceptions=True)
        self._beat_task = None
        self._write_heartbeat("failed" if self.failure else "stopped")

    async def _beat(self) -> None:
        """Written from the event loop itself: if the loop blocks, the file goes stale."""
        while True:
            self._write_heartbeat("stopping" if self.stopping.is_set() else self._state)
            await asyncio.sleep(self.health.interval_s)

    def _write_heartbeat(self, state: str) -> None:
        c = self.consumer
        beat = Heartbeat(
            service=self.name,
            instance=self.instance,
            pid=os.getpid(),
            written_at=time.time(),
            state=state,
            nats_connected=bool(self.bus is not None and self.bus.connected),
            consumer_loop_at=c.loop_at if c else 0.0,
            inflight=c.inflight if c else 0,
            processed=c.processed if c else 0,
            dead_lettered=c.dead_lettered if c else 0,
            errors=self.errors + (c.errors if c else 0),
            last_error=(c.last_error if c and c.last_error else self.last_error),
            failure=self.failure,
            bus_error=self.bus.writes.error if self.bus is not None else "",
            bus_error_since=self.bus.writes.since if self.bus is not None else 0.0,
        )
        try:
            write_heartbeat(heartbeat_path(self.name, self.health.file), beat)
        except OSError as exc:  # a full or read-only disk must not stop the work; the probe will say so
            log.warning("cannot write heartbeat: %s", exc)

    async def stop(self) -> None:
        self.stopping.set()

    async def close(self) -> None:
        await self._stop_beat()
        await self.on_stop()
        if self.bus is not None:
            await self.bus.close(self.nats.drain_timeout_s)
        shutdown_tracing()

    async def publish(self, run_id: str, body, key=None) -> int:
        """Publish one fact as this service (deterministic id from the body's key)."""
        assert self.bus is not None
        return await self.bus.publish(events.make_event(run_id, self.producer, body, key))


async def serve(service: Service) -> int:
    """Run a service until SIGTERM/SIGINT, then drain within the configured limit. Returns the
    process exit code: 0, or `EXIT_PERMANENT` after a permanent fault (see `Service.fail`)."""
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, lambda: asyncio.ensure_future(service.stop()))
    try:
        await service.setup()
        await service.run()
    except PERMANENT_SETUP_ERRORS as exc:
        if service.consumer is not None and service._state == "running":
            raise  # only setup errors are known permanent; a running service's crash is restartable
        service.fail(f"setup failed: {type(exc).__name__}: {exc}")
    finally:
        await service.close()  # also after a failed setup: the heartbeat says "stopped"/"failed", not stale
    if service.failure:
        print(f"{service.name}: {service.failure}", file=sys.stderr, flush=True)
        return EXIT_PERMANENT
    return 0
