"""The JetStream client every service uses: connect, ensure, publish, objects, lookups, replay."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import io
import logging
from collections.abc import Iterable, Sequence
from pathlib import Path

import nats
from nats.js import api
from nats.js.errors import APIError, BadObjectMetaError, DigestMismatchError, NotFoundError

from treegrpo import events
from treegrpo.bus._errors import BusUnavailable, ObjectDamaged, ObjectMissing
from treegrpo.bus._lookups import Lookups
from treegrpo.bus._names import ADAPTERS, DLQ_ROOT, DLQ_STREAM, STREAM, SUBMISSIONS
from treegrpo.bus._reads import Reads
from treegrpo.bus._writes import WriteHealth, write
from treegrpo.nats_url import server_list
from treegrpo.telemetry import event_trace_headers
from treegrpo.v1 import events_pb2 as pb

log = logging.getLogger(__name__)
__all__ = ["ADAPTERS", "DLQ_ROOT", "DLQ_STREAM", "STREAM", "SUBMISSIONS", "Bus", "file_sha256"]

ACK_WAIT_S = 10.0  # a publish without the stream's ack by then failed (the server down, or its store)
OBJECT_CHUNK = 1024 * 1024  # 1 MiB object chunks read far faster than the 128 KiB default
DUPLICATE_WINDOW_S = 24 * 3600  # a republish within a day of the original is dropped by the server


class Bus(Lookups):
    """One NATS connection + JetStream context. Build with `await Bus.connect(...)`."""

    def __init__(self, nc: nats.NATS, producer: str, replicas: int = 1):
        self.nc = nc
        self.js = nc.jetstream(timeout=ACK_WAIT_S)
        self.producer = producer
        self.replicas = replicas
        self.reconnects = 0  # bumped on every reconnect; consumer loops re-bind when it changes
        self.writes = WriteHealth()  # whether writes go through (a service's heartbeat reports it)
        self.reads = Reads()  # read requests sent, by what they are

    @property
    def connected(self) -> bool:
        """Whether the connection is up now (not closed, not reconnecting)."""
        return self.nc.is_connected

    @classmethod
    async def connect(
        cls, url: str | Sequence[str], producer: str, timeout_s: float = 10.0, replicas: int = 1
    ) -> Bus:
        """Connect to one server or a cluster's (a comma-separated string or a list of URLs)."""
        servers = server_list(url)
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
                        servers,
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
        await self._ensure_stream(STREAM, [f"{events.SUBJECT_ROOT}.>"])
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
        if (info.config.num_replicas or 1) != self.replicas:
            # never changed from here (a replica change moves data: an operator's `nats stream edit`);
            # consumers take the stream's own count, so the run works either way
            log.warning(
                "stream %s has %d replica(s), this service is configured for %d: using the stream's",
                name,
                info.config.num_replicas or 1,
                self.replicas,
            )

    # ---- publishing -------------------------------------------------------------------------
    def headers_for(self, event: pb.Event) -> dict[str, str]:
        """The dedup id, and trace context that every event carries: built here, on the one path
        all publishing takes, so no call site can leave it out."""
        event_id = event.envelope.event_id
        return {
            "Nats-Msg-Id": event_id,
            **event_trace_headers(event_id, events.kind_of(event), events.subject_of(event)),
        }

    @write
    async def publish(self, event: pb.Event) -> int:
        """Publish and wait for the stream's ack; returns the stream sequence (of the original on a
        duplicate)."""
        ack = await self.js.publish(
            events.subject_of(event), events.encode(event), headers=self.headers_for(event)
        )
        return ack.seq

    @write
    async def publish_many(self, batch: Iterable[pb.Event]) -> list[int]:
        """Pipelined publish (one round trip for the batch, not one per event). Bounded: nats.py's
        async acks have no timeout of their own, and a server that cannot store (a full disk)
        never answers, which would leave the caller waiting forever."""
        futures = [
            await self.js.publish_async(events.subject_of(e), events.encode(e), headers=self.headers_for(e))
            for e in batch
        ]
        acks = await asyncio.wait_for(asyncio.gather(*futures), ACK_WAIT_S + 0.01 * len(futures))
        return [a.seq for a in acks]

    @write
    async def publish_raw(self, subject: str, payload: bytes, headers: dict[str, str] | None = None) -> int:
        ack = await self.js.publish(subject, payload, headers=headers)
        return ack.seq

    # ---- objects ----------------------------------------------------------------------------
    @write
    async def put_object(self, bucket: str, key: str, data: bytes | str | Path) -> tuple[str, int]:
        """Store bytes or a file; returns (sha256 hex, size)."""
        store = await self.js.object_store(bucket)
        meta = api.ObjectMeta(name=key, options=api.ObjectMetaOptions(max_chunk_size=OBJECT_CHUNK))
        if isinstance(data, bytes):
            info = await store.put(key, data, meta=meta)
            return hashlib.sha256(data).hexdigest(), info.size
        with open(data, "rb") as fh:
            info = await store.put(key, fh, meta=meta)
        # the store hashed the bytes it took as it read them: no second read (and no blocked loop)
        return _digest_hex(info.digest), info.size

    async def object_size(self, bucket: str, key: str) -> int | None:
        """An object's size in bytes from its metadata (nothing downloaded), or None if it is missing."""
        store = await self.js.object_store(bucket)
        try:
            info = await store.get_info(key)
        except NotFoundError:
            return None
        return int(info.size or 0)

    async def object_digest(self, bucket: str, key: str) -> tuple[int, str] | None:
        """(size, sha256 hex) of an object from its metadata (nothing downloaded), or None if missing."""
        store = await self.js.object_store(bucket)
        try:
            info = await store.get_info(key)
        except NotFoundError:
            return None
        return int(info.size or 0), _digest_hex(info.digest)

    async def get_object(self, bucket: str, key: str, dest: str | Path | None = None) -> bytes | Path:
        """Read an object into `dest` (a file) or into memory, through `writeinto` (never `.data`).
        `ObjectMissing` when the bucket has no such object, `ObjectDamaged` when its chunks do not
        match their digest or its metadata does not read."""
        store = await self.js.object_store(bucket)
        try:
            if dest is None:
                buf = io.BytesIO()
                await store.get(key, writeinto=buf)
                return buf.getvalue()
            path = Path(dest)
            path.parent.mkdir(parents=True, exist_ok=True)
            with open(path, "wb") as fh:
                await store.get(key, writeinto=fh)
            return path
        except NotFoundError as exc:
            raise ObjectMissing(f"{key} is not in the {bucket} bucket") from exc
        except (DigestMismatchError, BadObjectMetaError) as exc:
            raise ObjectDamaged(f"{key} is damaged in the store ({type(exc).__name__})") from exc

    @write
    async def claim(self, event: pb.Event) -> bool:
        """Publish the first fact of a subject, atomically: False (nothing written) when one is
        already there. Two runners that chose one run id cannot both start it."""
        try:
            ack = await self.js.publish(
                events.subject_of(event),
                events.encode(event),
                headers={**self.headers_for(event), "Nats-Expected-Last-Subject-Sequence": "0"},
            )
        except APIError as exc:  # 10071 wrong last sequence: the subject holds a message already
            if exc.err_code == 10071:
                return False
            raise
        return not ack.duplicate  # within the duplicate window the server answers "duplicate" instead

    async def close(self, drain_timeout_s: float = 10.0) -> None:
        if self.nc.is_closed:
            return
        try:
            await asyncio.wait_for(self.nc.drain(), drain_timeout_s)
        except (TimeoutError, OSError, nats.errors.Error):  # reconnecting, or the server is gone
            with contextlib.suppress(TimeoutError, OSError, nats.errors.Error):
                await asyncio.wait_for(self.nc.close(), drain_timeout_s)


def _digest_hex(digest: str | None) -> str:
    """The hex sha256 of an object store's `SHA-256=<urlsafe base64>` digest."""
    b64 = (digest or "").split("=", 1)[-1]
    return base64.urlsafe_b64decode(b64 + "=" * (-len(b64) % 4)).hex()


def file_sha256(path: Path) -> str:
    """sha256 of a file, read in chunks (adapters and checkpoints run to hundreds of MB)."""
    with open(path, "rb") as fh:
        return hashlib.file_digest(fh, "sha256").hexdigest()
