"""Publishing a version: the adapter archive (`_archive`) into the object store and
`policy.published`, and at the same time a gRPC push to each sampler; then the wait for
`policy.loaded` of exactly that version (timeout, then push again).

A sampler loads a pushed version only once `policy.published` names its sha256, and that fact is
written only after the object is stored: pushing beside the upload changes what a sampler does
before the version is durable (spool and hash the bytes), not what it serves.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import grpc

from treegrpo import events
from treegrpo.bus import ADAPTERS, Bus
from treegrpo.events import Kind
from treegrpo.v1 import events_pb2 as pb
from treegrpo.v1 import weights_pb2 as wpb
from treegrpo.v1 import weights_pb2_grpc as wgrpc
from treegrpo_learner._archive import Archive

log = logging.getLogger(__name__)
RETRY_SOON_S = 3.0  # a push the sampler answered with an error goes again after this, not loaded_timeout_s
CHUNK = 1 << 20  # the contract's chunk limit: 1 MiB
LOADED, REFUSED, AGAIN = "loaded", "refused", "again"  # how one push ended


@dataclass(frozen=True)
class Published:
    version: int
    key: str
    sha256: str
    bytes: int
    path: Path


def adapter_key(run_id: str, version: int) -> str:
    return f"{run_id}/v{version}.tar"


def _chunks(run_id: str, version: int, sha: str, path: Path) -> Iterator[wpb.AdapterChunk]:
    total = path.stat().st_size
    with open(path, "rb") as fh:
        offset = 0
        while True:
            data = fh.read(CHUNK)
            if not data and offset > 0:
                return
            yield wpb.AdapterChunk(
                run_id=run_id, version=version, sha256=sha, total_bytes=total, offset=offset, data=data
            )
            offset += len(data)
            if not data:
                return


async def push(endpoint: str, run_id: str, pub: Published, timeout_s: float) -> wpb.PushAck:
    opts = [("grpc.max_send_message_length", 8 << 20), ("grpc.max_receive_message_length", 8 << 20)]
    async with grpc.aio.insecure_channel(endpoint, options=opts) as channel:
        stub = wgrpc.WeightSyncStub(channel)
        return await stub.PushAdapter(_chunks(run_id, pub.version, pub.sha256, pub.path), timeout=timeout_s)


async def loaded_count(bus: Bus, run_id: str, version: int, sha256: str) -> int:
    """Samplers that announced `policy.loaded` of this version with this sha256."""
    return len(await loaded_facts(bus, run_id, version, sha256))


async def loaded_facts(bus: Bus, run_id: str, version: int, sha256: str) -> list[pb.PolicyLoaded]:
    """The `policy.loaded` facts of this version with this sha256, one per sampler."""
    try:
        subjects = await bus.subjects(run_id, Kind.POLICY_LOADED, under=str(version))
        samplers = [(str(version), s.rsplit(".", 1)[-1]) for s in subjects]  # one fact per sampler
        found = await bus.last_events(run_id, Kind.POLICY_LOADED, samplers)
    except Exception:  # a bus hiccup: count nothing, the caller waits and asks again
        return []
    return [e.policy_loaded for e in found.values() if e.policy_loaded.sha256 in ("", sha256)]


def _waited(fact: pb.PolicyLoaded) -> float:
    """What the sampler's load waited for its engine's wake (all of it from a sampler that woke only
    at the load and does not say)."""
    return fact.wake_waited_seconds if fact.HasField("wake_waited_seconds") else fact.wake_seconds


class Publisher:
    def __init__(
        self,
        bus: Bus,
        producer: str,
        endpoints: list[str],
        expect_loaded: int,
        push_timeout_s: float,
        loaded_timeout_s: float,
        attempts: int,
    ):
        self.bus, self.producer, self.endpoints = bus, producer, list(endpoints)
        self.expect = len(self.endpoints) if expect_loaded < 0 else expect_loaded
        self.push_timeout_s, self.loaded_timeout_s, self.attempts = push_timeout_s, loaded_timeout_s, attempts

    async def upload(self, run_id: str, step: int, archive: Path, base_model: str) -> Published:
        key = adapter_key(run_id, step)
        sha, size = await self.bus.put_object(ADAPTERS, key, archive)
        body = pb.PolicyPublished(
            version=step, adapter_key=key, sha256=sha, bytes=size, step=step, base_model=base_model
        )
        await self.bus.publish(events.make_event(run_id, self.producer, body))
        return Published(step, key, sha, size, archive)

    async def publish(self, run_id: str, step: int, archive: Archive, base_model: str) -> dict[str, float]:
        """Upload a version and push it to every sampler at once, then wait for the confirmations.
        The push needs the archive's sha256 (taken as it was written), not the stored object: the
        samplers take in, hash, unpack and check the bytes while the upload runs."""
        pub = Published(step, adapter_key(run_id, step), archive.sha256, archive.bytes, archive.path)
        started = time.perf_counter()
        uploading = asyncio.create_task(self._upload_as(run_id, pub, base_model, started))
        try:
            metrics = await self.deliver(run_id, pub, uploading)
        finally:
            uploading.cancel()  # a no-op once it finished; a failed delivery leaves nothing running
        return metrics | {"upload_s": uploading.result()}

    async def _upload_as(self, run_id: str, pub: Published, base_model: str, started: float) -> float:
        """Seconds from `started` to `policy.published` of `pub`, whose sha256 the store must agree with."""
        stored = await self.upload(run_id, pub.version, pub.path, base_model)
        if (stored.sha256, stored.bytes) != (pub.sha256, pub.bytes):
            raise RuntimeError(
                f"v{pub.version}: the stored archive ({stored.bytes} bytes, sha256 {stored.sha256[:12]}…) "
                f"is not the one written ({pub.bytes} bytes, {pub.sha256[:12]}…)"
            )
        return time.perf_counter() - started

    async def deliver(
        self, run_id: str, pub: Published, uploading: asyncio.Task | None = None
    ) -> dict[str, float]:
        """Push to every sampler and wait for the confirmations; metrics of how it went. With
        `uploading` (the version's upload, still running) the first pushes run beside it, and a
        sampler that refused one (the announcement came too late for it) is pushed again at once."""
        started = time.perf_counter()
        attempt = 0
        for attempt in range(1, self.attempts + 1):  # noqa: B007 (reported below)
            outcomes = await self._push_all(run_id, pub, uploading)
            if uploading is not None:
                uploading = None
                if REFUSED in outcomes and attempt < self.attempts:
                    continue
            wait_s = RETRY_SOON_S if AGAIN in outcomes else self.loaded_timeout_s
            facts = await self._wait_loaded(run_id, pub, wait_s)
            if facts is not None:
                return {
                    "push_attempts": float(attempt),
                    "push_s": time.perf_counter() - started,
                    "push_confirmed": 1.0,
                    # colocated engines: the slowest one's sleep before the step and wake for this version
                    "sampler_sleep_s": max((f.sleep_seconds for f in facts), default=0.0),
                    "sampler_wake_s": max((f.wake_seconds for f in facts), default=0.0),
                    # of it, what the loads waited for (the rest ran beside the transfer and checks)
                    "sampler_wake_waited_s": max((_waited(f) for f in facts), default=0.0),
                }
            log.warning(
                "version %d: %d confirmation(s) missing after %.0fs (attempt %d/%d)",
                pub.version,
                self.expect,
                wait_s,
                attempt,
                self.attempts,
            )
        log.error(
            "version %d was not confirmed by %d sampler(s); they can still pull %s",
            pub.version,
            self.expect,
            pub.key,
        )
        return {
            "push_attempts": float(attempt),
            "push_s": time.perf_counter() - started,
            "push_confirmed": 0.0,
        }

    async def _push_all(self, run_id: str, pub: Published, uploading: asyncio.Task | None) -> list[str]:
        """One push to each sampler; with `uploading`, the upload finished too (its error raised,
        the pushes then cancelled)."""
        pushes = [asyncio.create_task(self._push_one(e, run_id, pub)) for e in self.endpoints]
        try:
            if uploading is not None:
                await uploading
            return list(await asyncio.gather(*pushes))
        finally:
            for t in pushes:
                t.cancel()

    async def _push_one(self, endpoint: str, run_id: str, pub: Published) -> str:
        """Push once: LOADED, REFUSED, or AGAIN when it should go again soon: the sampler answered
        with an error of its own (its confirmation's write failed, a stream leader lost
        mid-publish; issue 32)."""
        try:
            ack = await push(endpoint, run_id, pub, self.push_timeout_s)
        except grpc.aio.AioRpcError as exc:
            log.warning("push of v%d to %s failed: %s %s", pub.version, endpoint, exc.code(), exc.details())
            return AGAIN if exc.code() == grpc.StatusCode.UNKNOWN else REFUSED
        if not ack.accepted:
            log.warning("sampler %s refused v%d: %s", endpoint, pub.version, ack.reason)
            return REFUSED
        return LOADED

    async def _wait_loaded(
        self, run_id: str, pub: Published, timeout_s: float
    ) -> list[pb.PolicyLoaded] | None:
        """Every expected sampler's `policy.loaded` of this version; None when some never came."""
        if self.expect == 0:
            return []
        deadline = time.monotonic() + timeout_s
        delay = 0.02
        while time.monotonic() < deadline:
            facts = await loaded_facts(self.bus, run_id, pub.version, pub.sha256)
            if len(facts) >= self.expect:
                return facts
            await asyncio.sleep(delay)
            delay = min(0.5, delay * 2)
        return None
