"""The gRPC weight receiver: `WeightSync.PushAdapter`, client-streamed chunks of an adapter tar.

Chunks are checked as they arrive (same run, version and sha256 on each, contiguous offsets, no
more than announced), hashed and spooled to a file; a push that ends short is refused as truncated.
The complete archive goes through `AdapterLoader.load_archive` with the sha256 of the bytes received
(hashed on the way in: no second read of the archive, ~0.3 s of a 27B adapter's 467 MB), which
checks it against the push's claim and `policy.published`, swaps it in and publishes
`policy.loaded` before the ack is sent.
"""

from __future__ import annotations

import hashlib
import logging
import tempfile
import time
from pathlib import Path

import grpc

from treegrpo.events import check_token
from treegrpo.v1 import weights_pb2 as wpb
from treegrpo.v1 import weights_pb2_grpc as wgrpc
from treegrpo_sampler._adapters import AdapterLoader
from treegrpo_sampler._gate import LoadResult
from treegrpo_sampler.config import GrpcSettings

log = logging.getLogger(__name__)


class _Refused(Exception):
    pass


class WeightReceiver(wgrpc.WeightSyncServicer):
    """`await receiver.start()` binds host:port (0 = free port); `receiver.address` is then `host:port`."""

    def __init__(
        self,
        loader: AdapterLoader,
        host: str = "127.0.0.1",
        port: int = 0,
        max_bytes: int = 4 << 30,
        spool_dir: Path | None = None,
    ):
        self.loader, self.host, self.port, self.max_bytes = loader, host, port, max_bytes
        self.spool_dir = spool_dir
        self.server: grpc.aio.Server | None = None
        self.address = ""
        self.pushes = 0
        self.refusals = 0
        self.last_received_s = 0.0  # the last complete push's transfer, first chunk to last

    async def start(self) -> str:
        self.server = grpc.aio.server(options=[("grpc.max_receive_message_length", 8 << 20)])
        wgrpc.add_WeightSyncServicer_to_server(self, self.server)
        bound = self.server.add_insecure_port(f"{self.host}:{self.port}")
        if bound == 0:
            raise OSError(f"weight receiver could not bind {self.host}:{self.port}")
        await self.server.start()
        self.port, self.address = bound, f"{self.host}:{bound}"
        log.info("weight receiver listening on %s", self.address)
        return self.address

    async def stop(self, grace_s: float = 2.0) -> None:
        if self.server is not None:
            await self.server.stop(grace_s)

    async def PushAdapter(self, request_iterator, context) -> wpb.PushAck:  # noqa: N802 (gRPC name)
        self.pushes += 1
        with tempfile.TemporaryDirectory(dir=self.spool_dir) as tmp:
            archive = Path(tmp) / "adapter.tar"
            with self.loader.expecting():  # a sleeping engine wakes from the first chunk: not put back
                try:
                    started = time.perf_counter()
                    head, received_sha = await self._spool(request_iterator, archive)
                    self.last_received_s = time.perf_counter() - started
                    mb, seconds = head.total_bytes / 1e6, self.last_received_s
                    log.info(
                        "v%d of run %s: received %.1f MB in %.2f s", head.version, head.run_id, mb, seconds
                    )
                except _Refused as exc:
                    result = self.loader._refuse(str(exc))
                else:
                    result = await self.loader.load_archive(
                        head.run_id, head.version, archive, head.sha256, received_sha
                    )
        if not result.accepted:
            self.refusals += 1
        return _ack(result)

    async def _spool(self, chunks, archive: Path) -> tuple[wpb.AdapterChunk, str]:
        """The push's first chunk (its claims) and the sha256 of the bytes written to `archive`."""
        head: wpb.AdapterChunk | None = None
        received = 0
        digest = hashlib.sha256()
        with open(archive, "wb") as fh:
            async for chunk in chunks:
                if head is None:
                    head = self._check_head(chunk)
                    self.loader.wake_ahead(head.version)  # the wake runs beside the transfer
                elif (chunk.run_id, chunk.version, chunk.sha256, chunk.total_bytes) != (
                    head.run_id,
                    head.version,
                    head.sha256,
                    head.total_bytes,
                ):
                    raise _Refused("chunks disagree on run, version, sha256 or total_bytes")
                if chunk.offset != received:
                    raise _Refused(f"chunk at offset {chunk.offset}, expected {received}")
                received += len(chunk.data)
                if received > head.total_bytes:
                    raise _Refused(f"more bytes than the announced {head.total_bytes}")
                digest.update(chunk.data)
                fh.write(chunk.data)
        if head is None:
            raise _Refused("empty push")
        if received != head.total_bytes:
            raise _Refused(f"truncated push: {received} of {head.total_bytes} bytes")
        return head, digest.hexdigest()

    def _check_head(self, chunk: wpb.AdapterChunk) -> wpb.AdapterChunk:
        try:
            check_token(chunk.run_id, "run id")
        except ValueError as exc:
            raise _Refused(str(exc)) from exc
        if chunk.version < 1:
            raise _Refused("version must be >= 1 (0 is the base model)")
        if len(chunk.sha256) != 64:
            raise _Refused("sha256 must be 64 hex characters")
        if chunk.total_bytes > self.max_bytes:
            raise _Refused(f"{chunk.total_bytes} bytes exceed the limit of {self.max_bytes}")
        head = wpb.AdapterChunk()
        head.CopyFrom(chunk)
        head.data = b""
        return head


def _ack(result: LoadResult) -> wpb.PushAck:
    return wpb.PushAck(
        accepted=result.accepted,
        reason=result.reason,
        version=result.version,
        sha256=result.sha256,
        load_seconds=result.load_seconds,
    )


async def push_adapter(
    address: str,
    run_id: str,
    version: int,
    archive: bytes,
    chunk_bytes: int = 1 << 20,
    timeout_s: float = 120.0,
) -> wpb.PushAck:
    """Client side (what the learner calls): stream `archive` to the sampler at `address`."""
    import hashlib

    sha = hashlib.sha256(archive).hexdigest()

    def chunks():
        for offset in range(0, max(1, len(archive)), chunk_bytes):
            yield wpb.AdapterChunk(
                run_id=run_id,
                version=version,
                sha256=sha,
                total_bytes=len(archive),
                offset=offset,
                data=archive[offset : offset + chunk_bytes],
            )

    async with grpc.aio.insecure_channel(address) as channel:
        return await wgrpc.WeightSyncStub(channel).PushAdapter(chunks(), timeout=timeout_s)


async def serve_weights(
    loader: AdapterLoader, g: GrpcSettings, workdir: Path, instance: str
) -> WeightReceiver:
    """Start the receiver and write its host:port where the learner looks for it (`address_file`,
    else `<workdir>/<instance>.grpc`)."""
    receiver = WeightReceiver(loader, g.host, g.port, g.max_adapter_bytes, spool_dir=None)
    address = await receiver.start()
    addr_file = Path(g.address_file).expanduser() if g.address_file else workdir / f"{instance}.grpc"
    addr_file.parent.mkdir(parents=True, exist_ok=True)
    addr_file.write_text(address + "\n")
    log.info("sampler %s: weights at %s (written to %s)", instance, address, addr_file)
    return receiver
