"""Loading a policy version: verify the archive, unpack it, swap it in, confirm on the bus.

Both paths end here: a learner's gRPC push (`_weights.py`) and a pull from the object store
when a `policy.published` arrived but no push followed (a restarted sampler catching up). A
version is served only after its bytes match the sha256 announced in `policy.published`; a bad
archive is refused with a reason and the previous version keeps serving. `VersionGate` makes a
swap wait for groups being generated, so every sibling of a group carries the version that
actually produced it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import shutil
import tarfile
import time
from collections.abc import Callable
from pathlib import Path

from treegrpo import events
from treegrpo.bus import ADAPTERS, Bus, file_sha256
from treegrpo.events import Kind
from treegrpo.finite import nonfinite_in_folder
from treegrpo.safetar import extract_data
from treegrpo.v1 import events_pb2 as pb
from treegrpo_sampler._gate import LoadResult, VersionGate
from treegrpo_sampler._stopwatch import Stopwatch
from treegrpo_sampler.backends import EngineLost

log = logging.getLogger(__name__)


class AdapterLoader:
    def __init__(
        self,
        backend,
        bus: Bus,
        gate: VersionGate,
        sampler_id: str,
        workdir: Path,
        producer: str,
        published_wait_s: float = 10.0,
        on_engine_lost: Callable[[str], None] | None = None,
    ):
        self.backend, self.bus, self.gate = backend, bus, gate
        self.sampler_id, self.workdir, self.producer = sampler_id, Path(workdir), producer
        self.published_wait_s = published_wait_s
        self.on_engine_lost = on_engine_lost  # the service's fail(): the engine cannot serve again
        self.serving_sha = ""
        self.serving_run = ""  # adapters belong to one run; version 0 (the base model) to every run
        self._lock = asyncio.Lock()
        self.loaded = asyncio.Event()  # set after every successful swap (waiters re-check versions)
        self._confirmation: pb.Event | None = None  # the last swap's policy.loaded
        self.last_stages: dict[str, float] = {}  # seconds per stage of the last version served
        self._expected = 0  # pushes being received and loads under way
        self._waking: asyncio.Task | None = None  # a sleeping engine's wake, started ahead of its load

    @property
    def loading(self) -> bool:
        """A version is on its way in: the engine must not be put to sleep (it is waking for it).
        Every load runs inside `expecting` (`load_archive`), so the count covers the lock's holder."""
        return self._expected > 0

    @contextlib.contextmanager
    def expecting(self):
        """Held while a push is received: `loading` is true from its first chunk to its ack."""
        self._expected += 1
        try:
            yield
        finally:
            self._expected -= 1

    def wake_ahead(self, version: int) -> None:
        """A newer version is on its way: a sleeping engine starts taking its GPU back now, beside
        the transfer and the checks, not after them (the learner released the GPU before it pushed;
        the wake cost 0.44 s a step on the 9B and 1.2 s on the 27B when it came at the swap)."""
        if version <= self.backend.version or not getattr(self.backend, "asleep", False):
            return
        if self._waking is None or self._waking.done():
            self._waking = asyncio.create_task(self.backend.wake())
            # a failed wake is retried by the swap, which classifies it (EngineLost); never unread
            self._waking.add_done_callback(lambda t: t.cancelled() or t.exception())

    async def _waited_wake(self) -> float | None:
        """Seconds the swap waited for the wake started ahead of it; None when none was started."""
        task, self._waking = self._waking, None
        if task is None:
            return None
        started = time.perf_counter()
        with contextlib.suppress(Exception):
            await task
        return time.perf_counter() - started

    async def _confirm(self, version: int) -> None:
        """Publish the serving version's `policy.loaded` again: a swap whose confirmation the bus
        did not take (a stream leader lost mid-publish) left the learner waiting for it, and its
        re-push found the version already serving. The id is deterministic: a republish of a
        stored confirmation is dropped by the server."""
        done = self._confirmation
        if done is not None and done.policy_loaded.version == version:
            await self.bus.publish(done)

    def _refuse(self, reason: str) -> LoadResult:
        log.warning("adapter refused: %s (still serving v%d)", reason, self.backend.version)
        return LoadResult(False, reason, self.backend.version, self.serving_sha)

    async def announced(self, run_id: str, version: int) -> pb.PolicyPublished | None:
        """The `policy.published` of `version`, waiting briefly: the learner pushes while it still
        uploads (the announcement comes once the object is stored), so it is looked up often at
        first, then every 0.2 s."""
        deadline = time.monotonic() + self.published_wait_s
        delay = 0.01
        while True:
            event = await self.bus.last_event(run_id, Kind.POLICY_PUBLISHED, str(version))
            if event is not None:
                return event.policy_published
            if time.monotonic() >= deadline:
                return None
            await asyncio.sleep(delay)
            delay = min(0.2, delay * 2)

    async def load_archive(
        self, run_id: str, version: int, archive: Path, claimed_sha: str, actual_sha: str | None = None
    ) -> LoadResult:
        """Verify `archive` (a tar of a peft adapter folder) and serve it as `version`; `actual_sha`:
        the sha256 of its bytes where the caller hashed them as it wrote the file (else read here)."""
        with self.expecting():
            result = await self._load_archive(run_id, version, archive, claimed_sha, actual_sha)
        if not result.accepted and self._waking is not None and self._waking.done():
            self._waking = None  # that wake is over: the next version's load did not wait for it
        return result

    async def _load_archive(
        self, run_id: str, version: int, archive: Path, claimed_sha: str, actual_sha: str | None
    ) -> LoadResult:
        async with self._lock:
            if version == self.backend.version and version > 0:
                if claimed_sha == self.serving_sha:
                    await self._confirm(version)
                    return LoadResult(True, "already serving", version, self.serving_sha)
                return self._refuse(f"v{version} is already serving with sha256 {self.serving_sha[:12]}…")
            if version < self.backend.version:
                return self._refuse(f"v{version} is older than the serving v{self.backend.version}")
            self.wake_ahead(version)  # a pull's version, or a push whose first chunk found it awake
            watch = Stopwatch()
            actual = actual_sha or await watch.timed("hashed", asyncio.to_thread(file_sha256, archive))
            if actual != claimed_sha:
                return self._refuse(
                    f"sha256 mismatch: received bytes hash to {actual[:12]}…, "
                    f"the push claimed {claimed_sha[:12]}…"
                )
            ready = await self._unpack(run_id, version, archive, watch)
            if isinstance(ready, LoadResult):
                return ready
            why = await watch.timed("announced", self._unvouched(run_id, version, actual))
            if why:
                for made in {self._unpacked_dir(run_id, version), ready}:
                    shutil.rmtree(made, ignore_errors=True)
                return self._refuse(why)
            result = await watch.timed("swapped", self._swap(run_id, version, ready, actual))
            if result.accepted:  # one line for the version's whole way in, the swap last
                self.last_stages = dict(watch.seconds)
                log.info("serving v%d of run %s: %s", version, run_id, watch)
            return result

    def _unpacked_dir(self, run_id: str, version: int) -> Path:
        return self.workdir / run_id / f"v{version}"

    async def _unpack(self, run_id: str, version: int, archive: Path, watch: Stopwatch) -> Path | LoadResult:
        """The version unpacked, free of non-finite values and prepared by the backend, or the
        refusal: done before its announcement is looked up, while the learner's upload may still
        run (nothing here serves it)."""
        folder = self._unpacked_dir(run_id, version)
        try:
            await watch.timed("unpacked", asyncio.to_thread(_untar, archive, folder))
        except (tarfile.TarError, OSError, ValueError) as exc:
            return self._refuse(f"corrupt adapter archive: {type(exc).__name__}: {exc}")
        refused = await watch.timed("checked", self._check_finite(version, folder))
        if refused is None:
            try:
                return await watch.timed("prepared", asyncio.to_thread(self.backend.prepare_adapter, folder))
            except Exception as exc:  # the backend cannot read it: as refused as a corrupt archive
                refused = self._refuse(
                    f"v{version}: the backend could not prepare it: {type(exc).__name__}: {exc}"
                )
        shutil.rmtree(folder, ignore_errors=True)  # a refused version leaves no unpacked folder
        return refused

    async def _unvouched(self, run_id: str, version: int, sha: str) -> str:
        """Why the version's `policy.published` does not vouch for bytes hashing to `sha` ("" if it does)."""
        published = await self.announced(run_id, version)
        if published is None:
            return f"no policy.published for v{version} of run {run_id} within {self.published_wait_s:.0f}s"
        if published.sha256 != sha:
            return f"sha256 {sha[:12]}… differs from policy.published's {published.sha256[:12]}…"
        return ""

    async def _check_finite(self, version: int, folder: Path) -> LoadResult | None:
        """A refusal if the adapter holds NaN/inf (its sha256 can match: the learner saved it so)."""
        try:
            bad = await asyncio.to_thread(nonfinite_in_folder, folder)
        except Exception as exc:  # unreadable safetensors: as refused as a corrupt archive
            return self._refuse(f"v{version}: unreadable adapter weights: {type(exc).__name__}: {exc}")
        if not bad:
            return None
        return self._refuse(f"v{version} holds {sum(bad.values())} non-finite values ({', '.join(bad)})")

    async def _swap(self, run_id: str, version: int, folder: Path, sha: str) -> LoadResult:
        """Load and record the version as one: a push whose caller went away (the learner killed
        mid-push) cancels the RPC's handler, and a swap cancelled after the backend loaded left a
        sampler serving a version it had no record of (no sha, no run: every later push refused and
        the run waiting for good, seen in the compose stack's learner fault). The swap finishes."""
        return await asyncio.shield(self._swap_now(run_id, version, folder, sha))

    async def _swap_now(self, run_id: str, version: int, folder: Path, sha: str) -> LoadResult:
        started = time.perf_counter()
        waited = await self._waited_wake()
        slept = waited is not None or getattr(self.backend, "asleep", False)  # else it wakes in the load
        try:
            async with self.gate.swapping():
                await self.backend.load_adapter(version, folder)
        except EngineLost as exc:  # not this adapter's fault: no version can load into this engine
            if self.on_engine_lost is not None:
                self.on_engine_lost(str(exc))
            return self._refuse(f"v{version}: {exc}")
        except Exception as exc:  # a broken adapter must not take the sampler down
            return self._refuse(f"backend could not load v{version}: {type(exc).__name__}: {exc}")
        seconds = time.perf_counter() - started
        self.serving_sha, self.serving_run = sha, run_id
        body = pb.PolicyLoaded(version=version, sampler_id=self.sampler_id, load_seconds=seconds, sha256=sha)
        if slept:
            body.sleep_seconds = self.backend.last_sleep_seconds
            body.wake_seconds = self.backend.last_wake_seconds
            body.wake_waited_seconds = self.backend.last_wake_seconds if waited is None else waited
        self._confirmation = events.make_event(run_id, self.producer, body)
        await self.bus.publish(self._confirmation)
        self.loaded.set()
        self.loaded = asyncio.Event()
        return LoadResult(True, "", version, sha, seconds)

    async def pull(self, run_id: str, published: pb.PolicyPublished) -> LoadResult:
        """Fetch a published version from the object store and load it (no push came)."""
        if published.version <= self.backend.version:
            await self._confirm(published.version)
            return LoadResult(True, "already serving", self.backend.version, self.serving_sha)
        dest = self.workdir / run_id / f"pull-v{published.version}.tar"
        try:
            await self.bus.get_object(ADAPTERS, published.adapter_key, dest)
        except Exception as exc:  # missing object, bus hiccup: the caller retries later
            return self._refuse(f"pull of {published.adapter_key} failed: {type(exc).__name__}: {exc}")
        try:
            return await self.load_archive(run_id, published.version, dest, published.sha256)
        finally:
            dest.unlink(missing_ok=True)

    async def pull_when_due(
        self,
        run_id: str,
        published: pb.PolicyPublished,
        after_s: float,
        retry_s: float,
        stop: Callable[[], bool],
    ) -> None:
        """Pull `published` once `after_s` has passed without a push loading it, again every
        `retry_s` (1 s at least) while refused, until it is served or `stop()`."""
        deadline = time.monotonic() + after_s
        while self.backend.version < published.version and not stop():
            if time.monotonic() >= deadline:
                if (await self.pull(run_id, published)).accepted:
                    return
                deadline = time.monotonic() + max(1.0, retry_s)  # retry later
            await asyncio.sleep(min(0.5, max(0.05, deadline - time.monotonic())))


def _untar(archive: Path, folder: Path) -> None:
    """Unpack into a fresh folder, refusing absolute paths, links out, devices (`extract_data`)."""
    tmp = folder.with_name(folder.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    extract_data(archive, tmp)
    root = _adapter_root(tmp)
    shutil.rmtree(folder, ignore_errors=True)
    root.rename(folder)
    shutil.rmtree(tmp, ignore_errors=True)


def _adapter_root(tmp: Path) -> Path:
    """The folder holding adapter_config.json (the tar may wrap it in one directory)."""
    if (tmp / "adapter_config.json").is_file():
        return tmp
    inner = [p for p in tmp.iterdir() if p.is_dir()]
    if len(inner) == 1 and (inner[0] / "adapter_config.json").is_file():
        return inner[0]
    raise ValueError("archive holds no adapter_config.json")
