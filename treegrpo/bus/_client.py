"""The JetStream client every service uses: connect, ensure, publish, objects, lookups, replay."""

from __future__ import annotations

import asyncio
import hashlib
import io
import logging
from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass
from pathlib import Path

import nats
from nats.js import api
from nats.js.errors import APIError, NotFoundError

from treegrpo import events as ev_mod
from treegrpo.bus._errors import BusUnavailable
from treegrpo.events import Kind
from treegrpo.telemetry import event_trace_headers
from treegrpo.v1 import events_pb2 as pb

log = logging.getLogger(__name__)

STREAM = "TREEGRPO"
DLQ_STREAM = "TREEGRPO_DLQ"
DLQ_ROOT = "tgdlq"
SUBMISSIONS = "tg-submissions"
ADAPTERS = "tg-adapters"
CHUNK = 1024 * 1024  # 1 MiB object chunks read far faster than the 128 KiB default
DUPLICATE_WINDOW_S = 24 * 3600  # a republish within a day of the original is dropped by the server


@dataclass(frozen=True)
class RunEnds:
    """A run's lifecycle facts: attempts = 1 + resumes; open while fewer attempts ended."""

    started: bool
    completed: bool
    ended: int  # run.ended facts (one per attempt that ended)
    resumed: int  # run.resumed facts

    @property
    def attempt(self) -> int:
        return 1 + self.resumed

    @property
    def open(self) -> bool:
        return self.started and not self.completed and self.ended < self.attempt


class Bus:
    """One NATS connection + JetStream context. Build with `await Bus.connect(...)`."""

    def __init__(self, nc: nats.NATS, producer: str, replicas: int = 1):
        self.nc = nc
        self.js = nc.jetstream(timeout=10)
        self.producer = producer
        self.replicas = replicas
        self.reconnects = 0  # bumped on every reconnect; consumer loops re-bind when it changes

    @classmethod
    async def connect(cls, url: str, producer: str, timeout_s: float = 10.0, replicas: int = 1) -> Bus:
        holder: dict[str, Bus] = {}

        async def on_reconnect() -> None:
            if "bus" in holder:
                holder["bus"].reconnects += 1
                log.warning("reconnected to NATS (%d)", holder["bus"].reconnects)

        async def on_error(exc: Exception) -> None:
            log.debug("nats error: %s", exc)

        deadline = asyncio.get_running_loop().time() + timeout_s
        last: Exception | None = None
        nc = None
        while nc is None:  # retry the first connect until our own deadline (a server may be starting)
            left = deadline - asyncio.get_running_loop().time()
            if left <= 0:
                raise BusUnavailable(
                    f"could not reach NATS at {url} within {timeout_s:.1f}s ({type(last).__name__}: {last})"
                )
            try:
                nc = await asyncio.wait_for(
                    nats.connect(
                        url,
                        name=producer,
                        connect_timeout=max(0.2, min(2.0, left)),
                        allow_reconnect=True,
                        max_reconnect_attempts=-1,
                        reconnect_time_wait=0.5,
                        reconnected_cb=on_reconnect,
                        error_cb=on_error,
                        max_outstanding_pings=3,
                        ping_interval=5,
                    ),
                    left,
                )
            except (TimeoutError, OSError, nats.errors.Error) as exc:
                last = exc
                await asyncio.sleep(min(0.25, max(0.0, deadline - asyncio.get_running_loop().time())))
        bus = cls(nc, producer, replicas)
        holder["bus"] = bus
        return bus

    async def ensure(self) -> None:
        """Create or verify the event stream, the dead-letter stream and the object buckets."""
        await self._ensure_stream(STREAM, [f"{ev_mod.SUBJECT_ROOT}.>"])
        await self._ensure_stream(DLQ_STREAM, [f"{DLQ_ROOT}.>"])
        for bucket in (SUBMISSIONS, ADAPTERS):
            try:
                await self.js.object_store(bucket)
            except NotFoundError:
                await self.js.create_object_store(
                    bucket,
                    config=api.ObjectStoreConfig(
                        bucket=bucket, storage=api.StorageType.FILE, replicas=self.replicas
                    ),
                )

    async def _ensure_stream(self, name: str, subjects: list[str]) -> None:
        cfg = api.StreamConfig(
            name=name,
            subjects=subjects,
            storage=api.StorageType.FILE,
            retention=api.RetentionPolicy.LIMITS,
            num_replicas=self.replicas,
            duplicate_window=DUPLICATE_WINDOW_S,
            allow_direct=True,
        )
        try:
            info = await self.js.stream_info(name)
        except NotFoundError:
            await self.js.add_stream(cfg)
            return
        if sorted(info.config.subjects or []) != sorted(subjects):
            raise RuntimeError(
                f"stream {name} exists with subjects {info.config.subjects}, expected {subjects}"
            )

    # ---- publishing -------------------------------------------------------------------------
    def headers_for(self, event: pb.Event) -> dict[str, str]:
        """The dedup id, and trace context that every event carries: built here, on the one path
        all publishing takes, so no call site can leave it out."""
        event_id = event.envelope.event_id
        return {
            "Nats-Msg-Id": event_id,
            **event_trace_headers(event_id, ev_mod.kind_of(event), ev_mod.subject_of(event)),
        }

    async def publish(self, event: pb.Event) -> int:
        """Publish and wait for the stream's ack; returns the stream sequence (of the original on a
        duplicate)."""
        ack = await self.js.publish(
            ev_mod.subject_of(event), ev_mod.encode(event), headers=self.headers_for(event)
        )
        return ack.seq

    async def publish_many(self, events: Iterable[pb.Event]) -> list[int]:
        """Pipelined publish (one round trip for the batch, not one per event)."""
        futures = [
            await self.js.publish_async(ev_mod.subject_of(e), ev_mod.encode(e), headers=self.headers_for(e))
            for e in events
        ]
        acks = await asyncio.gather(*futures)
        return [a.seq for a in acks]

    async def publish_raw(self, subject: str, payload: bytes, headers: dict[str, str] | None = None) -> int:
        ack = await self.js.publish(subject, payload, headers=headers)
        return ack.seq

    # ---- objects ----------------------------------------------------------------------------
    async def put_object(self, bucket: str, key: str, data: bytes | str | Path) -> tuple[str, int]:
        """Store bytes or a file; returns (sha256 hex, size)."""
        store = await self.js.object_store(bucket)
        meta = api.ObjectMeta(name=key, options=api.ObjectMetaOptions(max_chunk_size=CHUNK))
        if isinstance(data, bytes):
            info = await store.put(key, data, meta=meta)
            return hashlib.sha256(data).hexdigest(), info.size
        with open(data, "rb") as fh:
            info = await store.put(key, fh, meta=meta)
        return file_sha256(Path(data)), info.size

    async def object_size(self, bucket: str, key: str) -> int | None:
        """An object's size in bytes from its metadata (nothing downloaded), or None if it is missing."""
        store = await self.js.object_store(bucket)
        try:
            info = await store.get_info(key)
        except NotFoundError:
            return None
        return int(info.size or 0)

    async def get_object(self, bucket: str, key: str, dest: str | Path | None = None) -> bytes | Path:
        """Read an object into `dest` (a file) or into memory, through `writeinto` (never `.data`)."""
        store = await self.js.object_store(bucket)
        if dest is None:
            buf = io.BytesIO()
            await store.get(key, writeinto=buf)
            return buf.getvalue()
        path = Path(dest)
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "wb") as fh:
            await store.get(key, writeinto=fh)
        return path

    # ---- lookups and replay -----------------------------------------------------------------
    async def last_event(self, run_id: str, kind: str, key: str | tuple | None = None) -> pb.Event | None:
        """The latest event on one exact subject (e.g. node X's `node.sampled`), or None."""
        try:
            raw = await self.js.get_last_msg(STREAM, ev_mod.subject(run_id, kind, key), direct=True)
        except NotFoundError:
            return None
        return ev_mod.decode(raw.data)

    async def replay(
        self, run_id: str, kinds: Iterable[str] | None = None, batch: int = 512
    ) -> AsyncIterator[tuple[int, pb.Event]]:
        """Every event of a run (optionally of some kinds), in stream order, up to the current end.

        Undecodable payloads are skipped here (the live consumers dead-letter them)."""
        filters = (
            [ev_mod.subject_filter(k, run_id) for k in kinds]
            if kinds
            else [f"{ev_mod.SUBJECT_ROOT}.{run_id}.>"]
        )
        cfg = api.ConsumerConfig(
            filter_subjects=filters,
            ack_policy=api.AckPolicy.NONE,
            deliver_policy=api.DeliverPolicy.ALL,
            inactive_threshold=60.0,
            max_ack_pending=-1,
        )
        sub = await self.js.pull_subscribe(filters[0], durable=None, stream=STREAM, config=cfg)
        try:
            remaining = (await sub.consumer_info()).num_pending
            while remaining > 0:
                try:
                    msgs = await sub.fetch(min(batch, remaining), timeout=5)
                except TimeoutError:
                    break
                for m in msgs:
                    remaining = m.metadata.num_pending
                    try:
                        event = ev_mod.decode(m.data)
                    except ev_mod.UndecodableEvent:
                        log.warning("replay skipped undecodable message %s", m.metadata.sequence.stream)
                        continue
                    if ev_mod.subject_of(event) != m.subject:
                        log.warning("replay skipped %s: body does not match its subject", m.subject)
                        continue
                    yield m.metadata.sequence.stream, event
        finally:
            try:
                await sub.unsubscribe()
            except Exception:  # the ephemeral consumer expires on its own
                pass

    async def run_ids(self) -> list[str]:
        """Run ids that have a run.started event, sorted by name. The runner's ids are
        `YYYYmmdd_HHMMSS_<6 hex>` (UTC), so for them name order is start order to the second (ids of one
        second in hex order); ids chosen by hand or imported sort by name wherever their time falls."""
        info = await self.js.stream_info(STREAM, subjects_filter=f"{ev_mod.SUBJECT_ROOT}.*.run.started")
        subjects = sorted((info.state.subjects or {}).keys())
        return [s.split(".")[1] for s in subjects]

    async def claim(self, event: pb.Event) -> bool:
        """Publish the first fact of a subject, atomically: False (nothing written) when one is
        already there. Two runners that chose one run id cannot both start it."""
        try:
            ack = await self.js.publish(
                ev_mod.subject_of(event),
                ev_mod.encode(event),
                headers={**self.headers_for(event), "Nats-Expected-Last-Subject-Sequence": "0"},
            )
        except APIError as exc:  # 10071 wrong last sequence: the subject holds a message already
            if exc.err_code == 10071:
                return False
            raise
        return not ack.duplicate  # within the duplicate window the server answers "duplicate" instead

    async def run_ends(self, run_id: str) -> RunEnds:
        """How the run's attempts ended so far, from the subjects alone (one request)."""
        info = await self.js.stream_info(STREAM, subjects_filter=f"{ev_mod.SUBJECT_ROOT}.{run_id}.run.>")
        kinds = [".".join(s.split(".")[2:4]) for s in (info.state.subjects or {})]
        return RunEnds(
            started=Kind.RUN_STARTED in kinds,
            completed=Kind.RUN_COMPLETED in kinds,
            ended=kinds.count(Kind.RUN_ENDED),
            resumed=kinds.count(Kind.RUN_RESUMED),
        )

    async def close(self, drain_timeout_s: float = 10.0) -> None:
        if self.nc.is_closed:
            return
        try:
            await asyncio.wait_for(self.nc.drain(), drain_timeout_s)
        except (TimeoutError, nats.errors.Error):
            await self.nc.close()


def file_sha256(path: Path) -> str:
    """sha256 of a file, read in chunks (adapters and checkpoints run to hundreds of MB)."""
    with open(path, "rb") as fh:
        return hashlib.file_digest(fh, "sha256").hexdigest()
