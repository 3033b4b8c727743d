"""The durable pull-consumer loop: fetch (one bounded await), dispatch, ack after the effect.

Failures are classified here, at the edge:
- undecodable payload       -> dead-letter with the reason, term
- a body not of its subject, or other content on a fact's subject -> dead-letter (`_facts.py`)
- PermanentError            -> dead-letter with the reason, term
- TransientError            -> nak(delay) and redelivery
- any other exception       -> nak with exponential backoff; dead-lettered after `max_deliver`
- a bus outage behind it    -> nak, never dead-lettered: a handler that could not write (a full
  disk, NATS down; `bus_fault_in`, or this bus's writes failing now) lost nothing of its message
After a NATS reconnect (e.g. a server restart) the pull subscription is re-bound: nats.py's
pull subscriptions can otherwise go quiet forever after a reboot (nats.py#504).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time

import nats
from nats.js.errors import APIError
from opentelemetry import trace

from treegrpo import events
from treegrpo.bus._client import STREAM, Bus
from treegrpo.bus._deadletter import dead_letter, run_of
from treegrpo.bus._errors import Deferred, PermanentError, TransientError
from treegrpo.bus._facts import verdict
from treegrpo.bus._options import ConsumerOptions, Delivery, Handler, durable_config
from treegrpo.bus._writes import bus_fault_in
from treegrpo.telemetry import context_from_headers
from treegrpo.v1 import events_pb2 as pb

log = logging.getLogger(__name__)
# consumer configs JetStream refuses for good (nats-server 2.15 answers some with a 500): an
# unchangeable field changed (10012), replicas in a single server (10074), over the stream's (10126)
REFUSED_CONSUMER_CODES = frozenset({10012, 10074, 10126})
__all__ = ["Consumer", "ConsumerOptions", "Delivery", "Handler"]


class Consumer:
    def __init__(
        self,
        bus: Bus,
        durable: str,
        filters: list[str],
        handler: Handler,
        options: ConsumerOptions | None = None,
        tracer: trace.Tracer | None = None,
        owner: str = "",
    ):
        self.bus, self.durable, self.filters, self.handler = bus, durable, filters, handler
        # whose dead letters (`tgdlq.<owner>.<run>`): the service, whatever its durable is named,
        # so NATS permissions can grant each service its own dead-letter subjects by a whole token
        self.owner = owner or durable
        self.opt = options or ConsumerOptions()
        self.tracer = tracer or trace.get_tracer("treegrpo.bus")
        # no tracer given and no SDK provider installed: skip span bookkeeping on the hot path
        self._traced = tracer is not None or not isinstance(
            trace.get_tracer_provider(), trace.ProxyTracerProvider
        )
        self._sub = None
        self._bound_at = -1
        self._inflight: set[asyncio.Task] = set()  # the worker tasks
        self._queue: asyncio.Queue = asyncio.Queue()
        self._slot_freed = asyncio.Event()
        self._busy = 0
        self._working: dict[int, tuple[float, object]] = {}  # id(msg) -> (start, msg), for heartbeats
        self.processed = 0
        self.received_bytes = 0  # payload bytes of the messages fetched (what this service reads)
        self.dead_lettered = 0
        self.deferred = 0  # messages handed back to wait (Deferred): not failures
        self.errors = 0  # handler failures (retried or dead-lettered): the heartbeat shows them
        self.last_error = ""
        self.loop_at = 0.0  # unix time the fetch loop last began a turn (the heartbeat reports it)

    async def _bind(self) -> None:
        cfg = durable_config(self.durable, self.filters, self.opt)
        # add_consumer is create-or-update, so a changed filter list takes effect on restart
        try:
            await self.bus.js.add_consumer(STREAM, cfg)
        except APIError as exc:
            if exc.code == 400 or exc.err_code in REFUSED_CONSUMER_CODES:  # no retry changes these
                raise PermanentError(
                    f"JetStream refused consumer {self.durable}: {exc.description} (err_code {exc.err_code})"
                ) from exc
            raise
        if self._sub is not None:
            with contextlib.suppress(Exception):
                await self._sub.unsubscribe()
        self._sub = await self.bus.js.pull_subscribe_bind(durable=self.durable, stream=STREAM)
        self._bound_at = self.bus.reconnects

    async def run(self, stop: asyncio.Event, drain_timeout_s: float = 10.0) -> None:
        """Consume until `stop` is set; then let in-flight handlers finish (bounded)."""
        self._queue = asyncio.Queue()
        self._slot_freed = asyncio.Event()
        self._busy = 0
        tasks = [asyncio.create_task(self._heartbeat())]
        tasks += [asyncio.create_task(self._worker()) for _ in range(self.opt.max_inflight)]
        self._inflight = set(tasks[1:])
        try:
            await self._loop(stop)
            await self._give_back_queued()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._drain_busy(), drain_timeout_s)
        finally:
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)  # cancelled handlers nak first
            if self._sub is not None:
                # a pull subscription's queue holds the server's status replies; left subscribed,
                # it never drains and the connection's drain waits out its whole timeout
                with contextlib.suppress(Exception):
                    await self._sub.unsubscribe()
                self._sub = None

    async def _give_back_queued(self) -> None:
        """Fetched but not started: nak now, so the next consumer gets them at once rather than
        after ack_wait."""
        while not self._queue.empty():
            msg = self._queue.get_nowait()
            with contextlib.suppress(Exception):
                await msg.nak()

    @property
    def inflight(self) -> int:
        return self._busy

    async def _drain_busy(self) -> None:
        while self._busy:
            self._slot_freed.clear()
            await self._slot_freed.wait()

    async def _loop(self, stop: asyncio.Event) -> None:
        failures = 0
        while not stop.is_set():
            # a turn that fails (NATS down, re-binding) still turns: only a hung await goes stale
            self.loop_at = time.time()
            try:
                if self._sub is None or self._bound_at != self.bus.reconnects:
                    await self._bind()
                await self._step()
                failures = 0
            except (nats.errors.Error, OSError, TimeoutError) as exc:
                failures += 1
                delay = min(5.0, 0.2 * 2 ** min(failures, 5))
                log.warning(
                    "%s: bus error %s: %s; re-binding in %.1fs", self.durable, type(exc).__name__, exc, delay
                )
                self._sub = None
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), delay)

    async def _step(self) -> None:
        held = self._busy + self._queue.qsize()
        free = self.opt.max_inflight - held
        # refill in batches: one fetch round trip per few slots, not per freed slot
        if free <= 0 or (held and free < max(1, self.opt.max_inflight // 4)):
            self._slot_freed.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._slot_freed.wait(), self.opt.fetch_timeout_s)
            return
        try:
            msgs = await self._sub.fetch(free, timeout=self.opt.fetch_timeout_s)
        except TimeoutError:
            return
        for msg in msgs:
            self._queue.put_nowait(msg)

    async def _worker(self) -> None:
        """One of `max_inflight` workers; a fixed pool, not a task per message (2x throughput)."""
        while True:
            msg = await self._queue.get()
            self._busy += 1
            try:
                await self._process(msg)
            except Exception as exc:  # an ack, nak or dead letter the bus did not take: the message
                # comes back after ack_wait; the worker must not die with it (the pool would shrink)
                self.errors += 1
                self.last_error = f"{type(exc).__name__}: {exc}"[:300]
                log.warning("%s: could not settle a message: %s", self.durable, self.last_error)
            finally:
                self._busy -= 1
                self._queue.task_done()
                self._slot_freed.set()

    async def _process(self, msg) -> None:
        meta = msg.metadata
        self.received_bytes += len(msg.data or b"")
        delivery = Delivery(msg.subject, meta.sequence.stream, meta.num_delivered)
        try:
            event = events.decode(msg.data)
        except events.UndecodableEvent as exc:
            await self._dead_letter(msg, delivery, str(exc), run_id=run_of(msg.subject))
            return
        try:
            msg_id = (msg.headers or {}).get("Nats-Msg-Id", "")
            judged = await verdict(self.bus, msg.subject, delivery.stream_seq, event, msg_id)
        except (nats.errors.Error, OSError, TimeoutError):  # could not look: the message comes back
            await msg.nak(delay=1.0)
            return
        if judged.reason:
            await self._dead_letter(msg, delivery, judged.reason, run_id=run_of(msg.subject))
            return
        kind = events.kind_of(event)
        if not self._traced:
            await self._handle(msg, event, delivery, None)
            return
        ctx = context_from_headers(msg.headers) if msg.headers and "traceparent" in msg.headers else None
        with self.tracer.start_as_current_span(
            f"{self.durable} {kind}", context=ctx, kind=trace.SpanKind.CONSUMER
        ) as span:
            span.set_attribute("treegrpo.event_id", event.envelope.event_id)
            span.set_attribute("treegrpo.run_id", event.envelope.run_id)
            await self._handle(msg, event, delivery, span)

    async def _handle(self, msg, event: pb.Event, delivery: Delivery, span) -> None:
        loop = asyncio.get_running_loop()
        self._working[id(msg)] = (loop.time(), msg)
        try:
            await self.handler(event, delivery)
        except PermanentError as exc:
            if span is not None:
                span.set_status(trace.StatusCode.ERROR, exc.reason)
            await self._dead_letter(msg, delivery, exc.reason, run_id=event.envelope.run_id)
            return
        except Deferred as exc:  # waiting is not failing: no error, no delivery budget spent
            self.deferred += 1
            await msg.nak(delay=exc.delay_s)
            return
        except TransientError as exc:
            await self._retry(
                msg, event, delivery, exc.reason, exc.delay_s, bus=bus_fault_in(exc) is not None
            )
            return
        except asyncio.CancelledError:  # stopped mid-handler: hand the message straight back
            with contextlib.suppress(Exception):
                await asyncio.shield(msg.nak())
            raise
        except Exception as exc:  # unexpected: retry with backoff, never crash the loop
            log.exception("%s: handler failed on %s", self.durable, event.envelope.event_id)
            if span is not None:
                span.record_exception(exc)
            delay = min(self.opt.backoff_max_s, self.opt.backoff_s * 2 ** (delivery.num_delivered - 1))
            bus = bus_fault_in(exc) is not None
            await self._retry(msg, event, delivery, f"{type(exc).__name__}: {exc}", delay, bus=bus)
            return
        finally:
            self._working.pop(id(msg), None)
        await msg.ack()
        self.processed += 1

    async def _retry(
        self, msg, event: pb.Event, delivery: Delivery, reason: str, delay: float, bus: bool = False
    ) -> None:
        self.errors += 1
        self.last_error = reason[:300]
        if bus or self._bus_failing():  # the bus's fault, not the message's: retry for as long as it lasts
            await msg.nak(delay=delay)
            return
        if delivery.num_delivered >= self.opt.max_deliver:
            await self._dead_letter(
                msg,
                delivery,
                f"gave up after {delivery.num_delivered} deliveries: {reason}",
                run_id=event.envelope.run_id,
            )
        else:
            await msg.nak(delay=delay)

    def _bus_failing(self) -> bool:
        """While this bus's writes fail (or it is disconnected), a failed handler is not counted
        against its message: a handler that could not publish (a full disk, a NATS restart) would
        otherwise be dead-lettered after `max_deliver` tries and its work lost."""
        return bool(self.bus.writes.error) or not self.bus.nc.is_connected

    async def _heartbeat(self) -> None:
        """Long handlers (a 10-minute script) keep their message from being redelivered. One
        loop for all in-flight messages: a task per message would halve throughput."""
        period = max(0.5, self.opt.ack_wait_s / 3)
        loop = asyncio.get_running_loop()
        while True:
            await asyncio.sleep(period)
            now = loop.time()
            for started, msg in list(self._working.values()):
                if now - started >= period:
                    with contextlib.suppress(Exception):
                        await msg.in_progress()

    async def _dead_letter(self, msg, delivery: Delivery, reason: str, run_id: str) -> None:
        await dead_letter(self.bus, self.durable, self.owner, msg, delivery, reason, run_id)
        self.dead_lettered += 1
        self.errors += 1
        self.last_error = f"dead-lettered: {reason}"[:300]
        log.error("%s: dead-lettered seq %d: %s", self.durable, delivery.stream_seq, reason)
