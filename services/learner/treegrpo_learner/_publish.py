"""Publishing a version: adapter tar -> object store -> `policy.published` -> gRPC push to each
sampler -> wait for `policy.loaded` of exactly that version (timeout, then push again).

The tar holds the peft `save_pretrained` folder at its root plus `treegrpo_state.json` (the
learner state after the step and the step's record), so any published version is also a point
the learner can resume from when its local checkpoint is older or gone.
"""

from __future__ import annotations

import asyncio
import json
import logging
import tarfile
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import grpc

from treegrpo import events
from treegrpo.bus import ADAPTERS, Bus
from treegrpo.events import Kind
from treegrpo.safetar import extract_data
from treegrpo.v1 import events_pb2 as pb
from treegrpo.v1 import weights_pb2 as wpb
from treegrpo.v1 import weights_pb2_grpc as wgrpc

log = logging.getLogger(__name__)
RETRY_SOON_S = 3.0  # a push the sampler answered with an error goes again after this, not loaded_timeout_s
CHUNK = 1 << 20  # the contract's chunk limit: 1 MiB
STATE_FILE = "treegrpo_state.json"


@dataclass(frozen=True)
class Published:
    version: int
    key: str
    sha256: str
    bytes: int
    path: Path


def adapter_key(run_id: str, version: int) -> str:
    return f"{run_id}/v{version}.tar"


def write_archive(model, extra: dict, dest: Path, dtype: str = "float32") -> Path:
    """Tar of the adapter folder (files at the tar's root) with the learner's state beside it; the
    adapter's floating tensors in `dtype` (the trainer's float32 master weights, or bfloat16)."""
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        model.save_pretrained(folder)
        if dtype != "float32":
            cast_adapter(folder / "adapter_model.safetensors", dtype)
        (folder / STATE_FILE).write_text(json.dumps(extra))
        dest.parent.mkdir(parents=True, exist_ok=True)
        with tarfile.open(dest, "w") as tar:
            for f in sorted(folder.iterdir()):
                info = tar.gettarinfo(str(f), arcname=f.name)
                info.mtime, info.uid, info.gid, info.uname, info.gname = 0, 0, 0, "", ""
                with open(f, "rb") as fh:
                    tar.addfile(info, fh)
    return dest


def cast_adapter(path: Path, dtype: str) -> None:
    """Rewrite a safetensors file with its floating tensors in `dtype` (keys, shapes, metadata kept)."""
    import torch
    from safetensors import safe_open
    from safetensors.torch import save_file

    target = getattr(torch, dtype)
    weights = {}
    with safe_open(str(path), "pt") as f:  # one open: the tensors and the metadata together
        metadata = f.metadata()
        for key in f.keys():
            t = f.get_tensor(key)
            weights[key] = t.to(target) if t.is_floating_point() else t
    save_file(weights, str(path), metadata=metadata)


def read_archive(archive: Path, folder: Path) -> dict:
    folder.mkdir(parents=True, exist_ok=True)
    extract_data(archive, folder)
    return json.loads((folder / STATE_FILE).read_text())


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

    async def deliver(self, run_id: str, pub: Published) -> dict[str, float]:
        """Push to every sampler and wait for the confirmations; metrics of how it went."""
        started = time.perf_counter()
        attempt = 0
        for attempt in range(1, self.attempts + 1):  # noqa: B007 (reported below)
            again = await asyncio.gather(*(self._push_one(e, run_id, pub) for e in self.endpoints))
            facts = await self._wait_loaded(
                run_id, pub, RETRY_SOON_S if any(again) else self.loaded_timeout_s
            )
            if facts is not None:
                return {
                    "push_attempts": float(attempt),
                    "push_s": time.perf_counter() - started,
                    "push_confirmed": 1.0,
                    # colocated engines: the slowest one's sleep before the step and wake for this version
                    "sampler_sleep_s": max((f.sleep_seconds for f in facts), default=0.0),
                    "sampler_wake_s": max((f.wake_seconds for f in facts), default=0.0),
                }
            log.warning(
                "version %d: %d confirmation(s) missing after %.0fs (attempt %d/%d)",
                pub.version,
                self.expect,
                self.loaded_timeout_s,
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

    async def _push_one(self, endpoint: str, run_id: str, pub: Published) -> bool:
        """Push once; True when it should go again soon: the sampler answered with an error of its
        own (its confirmation's write failed, a stream leader lost mid-publish; issue 32)."""
        try:
            ack = await push(endpoint, run_id, pub, self.push_timeout_s)
        except grpc.aio.AioRpcError as exc:
            log.warning("push of v%d to %s failed: %s %s", pub.version, endpoint, exc.code(), exc.details())
            return exc.code() == grpc.StatusCode.UNKNOWN
        if not ack.accepted:
            log.warning("sampler %s refused v%d: %s", endpoint, pub.version, ack.reason)
        return False

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
