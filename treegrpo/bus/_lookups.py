"""Reading the log back: one fact by subject, the facts of many keys in one read, a run's events
in order (replayed to the current end, or followed live), its spec, its subjects and ends, the runs.

Every read request is counted in `Bus.reads` (`Reads`), so a test can say how many a piece of
work costs: a trained group's members are one batched request, not one lookup per sibling.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from dataclasses import dataclass

import nats.errors
from nats.js.errors import NotFoundError

from treegrpo import events as ev_mod
from treegrpo.bus._errors import BusWriteError
from treegrpo.bus._names import STREAM
from treegrpo.bus._replay import REPLAY_FETCH_S, REPLAY_PATIENCE_S, Cursor, checked_event
from treegrpo.config import RunSpec
from treegrpo.events import Kind
from treegrpo.v1 import events_pb2 as pb

log = logging.getLogger(__name__)

MULTI_LAST_MAX = 256  # subjects per batched direct get (the server caps one request's subjects)
LOOKUP_TIMEOUT_S = 5.0  # a batched get's wait for each next message of its answer


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


@dataclass
class Reads:
    """The read requests a `Bus` sent, by what they are (tests and benchmarks count them)."""

    lookups: int = 0  # direct gets of one subject's last message (`last_event`)
    batches: int = 0  # batched direct gets of many subjects' last messages (`last_events`)
    consumers: int = 0  # read consumers opened (one per replay or `last_events`; more after stalls)
    fetches: int = 0  # pull fetches over those consumers
    infos: int = 0  # stream-info requests (a run's subjects, its ends, the runs)
    messages: int = 0  # messages the fetches and batches brought (replays, `last_events`)

    @property
    def total(self) -> int:
        """Requests sent (messages are not requests)."""
        return self.lookups + self.batches + self.consumers + self.fetches + self.infos


@dataclass(frozen=True)
class RunStart:
    """A run's `run.started`: what the run is, and who started it."""

    spec: RunSpec
    producer: str

    @property
    def imported(self) -> bool:
        """History read back from an archive (`treegrpo archive import`): never work to redo."""
        return self.producer == ev_mod.IMPORTED_PRODUCER


class Lookups:
    """The read side of `Bus` (it needs `self.nc`, `self.js` and `self.reads`)."""

    async def last_event(self, run_id: str, kind: str, key: str | tuple | None = None) -> pb.Event | None:
        """The latest event on one exact subject (e.g. node X's `node.sampled`), or None."""
        self.reads.lookups += 1
        try:
            raw = await self.js.get_last_msg(STREAM, ev_mod.subject(run_id, kind, key), direct=True)
        except NotFoundError:
            return None
        return ev_mod.decode(raw.data)

    async def last_events(
        self, run_id: str, kind: str, keys: Sequence[str | tuple]
    ) -> dict[str | tuple, pb.Event]:
        """The latest event of each key (e.g. a group's `node.sampled` facts) in one request: a
        batched direct get of their exact subjects (up to `MULTI_LAST_MAX` a request). A key with
        no event (or an undecodable one) is absent from the answer."""
        subjects = {ev_mod.subject(run_id, kind, k): k for k in keys}
        names, out = list(subjects), {}
        for i in range(0, len(names), MULTI_LAST_MAX):
            for subject, data in await self._multi_last(names[i : i + MULTI_LAST_MAX]):
                try:
                    event = ev_mod.decode(data)
                except ev_mod.UndecodableEvent:
                    log.warning("lookup skipped an undecodable message on %s", subject)
                    continue
                if ev_mod.subject_of(event) == subject:
                    out[subjects[subject]] = event
        return out

    async def _multi_last(self, subjects: list[str]) -> list[tuple[str, bytes]]:
        """(subject, payload) of each subject's newest message: JetStream's batched direct get
        (`multi_last`, nats-server 2.11+), answered message by message and ended by status 204;
        404 when none of the subjects holds one. Each answer says how many are still to come
        (`Nats-Num-Pending`): one lost on the way (a slow consumer's drop) is an error, never a
        shorter answer."""
        self.reads.batches += 1
        inbox = self.nc.new_inbox()
        # no byte limit on the inbox: the answer is what the caller keeps anyway, and a limit would
        # drop messages of a group of long completions (a slow consumer) instead of reading them
        sub = await self.nc.subscribe(inbox, pending_bytes_limit=0)
        try:
            request = json.dumps({"multi_last": subjects, "batch": len(subjects)}).encode()
            await self.nc.publish(f"$JS.API.DIRECT.GET.{STREAM}", request, reply=inbox)
            got, expected = [], 0
            while True:
                msg = await sub.next_msg(timeout=LOOKUP_TIMEOUT_S)
                headers = msg.headers or {}
                status = headers.get("Status")
                if status in ("204", "404"):
                    self.reads.messages += len(got)
                    if len(got) != expected:
                        raise BusWriteError(
                            f"batched read of {len(subjects)} subjects: {len(got)} of {expected}"
                        )
                    return got
                if status is not None:
                    raise BusWriteError(
                        f"batched read of {len(subjects)} subjects: status {status} {headers}"
                    )
                if not got:
                    expected = int(headers.get("Nats-Num-Pending", 0)) + 1
                got.append((headers.get("Nats-Subject", ""), msg.data))
        finally:
            with contextlib.suppress(Exception):
                await sub.unsubscribe()

    async def run_start(self, run_id: str) -> RunStart | None:
        """The run's spec and starter from its `run.started`; None while there is none. ValueError
        (pydantic's) when the recorded spec does not validate: no retry can fix it."""
        event = await self.last_event(run_id, Kind.RUN_STARTED)
        if event is None:
            return None
        return RunStart(RunSpec.from_json(event.run_started.run_spec_json), event.envelope.producer)

    async def replay(
        self,
        run_id: str,
        kinds: Iterable[str] | None = None,
        batch: int = 512,
        patience_s: float = REPLAY_PATIENCE_S,
        after: int = 0,
    ) -> AsyncIterator[tuple[int, pb.Event]]:
        """Every event of a run (optionally of some kinds; only those after stream sequence
        `after`), in stream order, up to the current end.

        Never short: it ends only when the server says nothing is left. A fetch that times out, a
        connection that drops, or a message lost in transit (the consumer's own sequence skips: its
        ack policy is none) re-opens the read after the last event handed out; a server that gives
        nothing for `patience_s` in a row raises `ReplayIncomplete`. Undecodable payloads are
        skipped here (the live consumers dead-letter them)."""
        filters = [ev_mod.subject_filter(k, run_id) for k in kinds] if kinds else [ev_mod.run_filter(run_id)]
        async for item in self._read(run_id, filters, batch, patience_s, after=after):
            yield item

    async def _read(
        self,
        run_id: str,
        filters: list[str],
        batch: int,
        patience_s: float,
        after: int = 0,
    ) -> AsyncIterator[tuple[int, pb.Event]]:
        cursor = Cursor(run_id, patience_s)
        cursor.last = after
        try:
            while True:
                try:
                    if cursor.sub is None:
                        self.reads.consumers += 1
                        await cursor.open(self.js, filters)
                    if cursor.remaining <= 0:
                        return
                    self.reads.fetches += 1
                    msgs = await cursor.sub.fetch(min(batch, cursor.remaining), timeout=REPLAY_FETCH_S)
                except (TimeoutError, OSError, nats.errors.Error) as exc:
                    await cursor.stalled(exc)
                    continue
                self.reads.messages += len(msgs)
                for m in msgs:
                    if not cursor.take(m):
                        break
                    event = checked_event(m)
                    if event is not None:
                        yield m.metadata.sequence.stream, event
        finally:
            await cursor.close()

    async def follow(
        self,
        run_id: str,
        stop: asyncio.Event | None = None,
        on_undecodable: Callable[[str, Exception], None] | None = None,
        poll_s: float = 0.5,
    ) -> AsyncIterator[pb.Event]:
        """A run's events live, from its first, in stream order (an ordered push consumer), until
        `stop` is set (looked at every `poll_s`) or the caller stops. An undecodable message is
        skipped; `on_undecodable(subject, error)` hears of it. Errors of the subscription (a server
        restart) end it: the caller follows again and drops what it saw by event id."""
        ev_mod.check_token(run_id, "run id")  # a pattern would follow other runs too
        sub = await self.js.subscribe(ev_mod.run_filter(run_id), stream=STREAM, ordered_consumer=True)
        try:
            while stop is None or not stop.is_set():
                try:
                    msg = await sub.next_msg(timeout=poll_s)
                except TimeoutError:
                    continue
                try:
                    event = ev_mod.decode(msg.data)
                except ev_mod.UndecodableEvent as exc:
                    if on_undecodable is not None:
                        on_undecodable(msg.subject, exc)
                    continue
                yield event
        finally:
            with contextlib.suppress(Exception):
                await sub.unsubscribe()

    async def subjects(
        self, run_id: str = "*", kind: str | None = None, under: str | tuple | None = None
    ) -> dict[str, int]:
        """The subjects of a run (of one kind; of the keys under `under`) with how many messages
        each holds: one stream-info request, no event read."""
        pattern = ev_mod.subject_filter(kind, run_id, under) if kind else ev_mod.run_filter(run_id)
        return await self._subjects(pattern)

    async def _subjects(self, pattern: str) -> dict[str, int]:
        self.reads.infos += 1
        info = await self.js.stream_info(STREAM, subjects_filter=pattern)
        return dict(info.state.subjects or {})

    async def check_stream(self) -> None:
        """Raise (the server's error) unless the event stream is there and answers."""
        self.reads.infos += 1
        await self.js.stream_info(STREAM)

    async def run_ids(self) -> list[str]:
        """Run ids that have a run.started event, sorted by name. The runner's ids are
        `YYYYmmdd_HHMMSS_<6 hex>` (UTC), so for them name order is start order to the second (ids of one
        second in hex order); ids chosen by hand or imported sort by name wherever their time falls."""
        subjects = await self.subjects(kind=Kind.RUN_STARTED)
        return sorted(s.split(".")[1] for s in subjects)

    async def run_ends(self, run_id: str) -> RunEnds:
        """How the run's attempts ended so far, from the subjects alone (one request)."""
        subjects = await self._subjects(ev_mod.run_filter(run_id, "run"))
        kinds = [".".join(s.split(".")[2:4]) for s in subjects]
        return RunEnds(
            started=Kind.RUN_STARTED in kinds,
            completed=Kind.RUN_COMPLETED in kinds,
            ended=kinds.count(Kind.RUN_ENDED),
            resumed=kinds.count(Kind.RUN_RESUMED),
        )
