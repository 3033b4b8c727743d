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

import nats.errors
from nats.js.errors import NotFoundError

from treegrpo import events
from treegrpo.bus._errors import BusWriteError
from treegrpo.bus._names import STREAM
from treegrpo.bus._reads import RunEnds, RunStart
from treegrpo.bus._replay import REPLAY_FETCH_S, REPLAY_PATIENCE_S, Cursor, checked_event
from treegrpo.config import RunSpec
from treegrpo.events import Kind
from treegrpo.v1 import events_pb2 as pb

log = logging.getLogger(__name__)

MULTI_LAST_MAX = 256  # subjects per batched direct get (the server caps one request's subjects)
LOOKUP_TIMEOUT_S = 5.0  # a batched get's wait for each next message of its answer


class Lookups:
    """The read side of `Bus` (it needs `self.nc`, `self.js` and `self.reads`)."""

    async def last_event(self, run_id: str, kind: str, key: str | tuple | None = None) -> pb.Event | None:
        """The fact on one exact subject (e.g. node X's `node.sampled`), or None.

        The *first* fact there, whatever its name says (kept for its many callers): a fact is
        immutable and its subject holds one, so a later message on the subject with other content is
        a forgery or a bug (consumers dead-letter it, replays skip it) and never supersedes the fact."""
        first = await self.first_fact(events.subject(run_id, kind, key))
        return None if first is None else first[1]

    async def first_fact(self, subject: str) -> tuple[int, pb.Event] | None:
        """(stream sequence, event) of the first message on `subject` that decodes and belongs on it,
        or None. Garbage before it (fuzz, a corrupt writer: dead-lettered by the consumers) is
        stepped over, one direct get each; a clean subject costs one."""
        seq = 1
        while True:
            self.reads.lookups += 1
            try:
                raw = await self.js.get_msg(STREAM, seq=seq, subject=subject, direct=True, next=True)
            except NotFoundError:
                return None
            self.reads.payload_bytes += len(raw.data or b"")
            try:
                event = events.decode(raw.data or b"")
            except events.UndecodableEvent:
                event = None
            if event is not None and events.subject_of(event) == subject:
                return raw.seq, event
            seq = raw.seq + 1

    async def last_events(
        self, run_id: str, kind: str, keys: Sequence[str | tuple]
    ) -> dict[str | tuple, pb.Event]:
        """The latest event of each key (e.g. a group's `node.sampled` facts) in one request: a
        batched direct get of their exact subjects (up to `MULTI_LAST_MAX` a request). A key with
        no event (or an undecodable one) is absent from the answer."""
        found = await self.last_facts(run_id, [(kind, k) for k in keys])
        return {k: event for (_kind, k), event in found.items()}

    async def last_facts(
        self, run_id: str, wanted: Sequence[tuple[str, str | tuple]]
    ) -> dict[tuple[str, str | tuple], pb.Event]:
        """`last_events` over (kind, key) pairs of several kinds in one request: e.g. a group's
        `node.sampled` facts and their `tokens.recorded` (the learner's one read per group). The
        answer is keyed by the pairs as asked; a pair with no fact is absent."""
        subjects = {events.subject(run_id, kind, k): (kind, k) for kind, k in wanted}
        names, out = list(subjects), {}
        for i in range(0, len(names), MULTI_LAST_MAX):
            for subject, data, msg_id in await self._multi_last(names[i : i + MULTI_LAST_MAX]):
                event = await self._standing(subject, data, msg_id)
                if event is not None:
                    out[subjects[subject]] = event
        return out

    async def _standing(self, subject: str, data: bytes, msg_id: str) -> pb.Event | None:
        """The fact on `subject` given its newest message: that message when it is a fact of this
        subject stored under its own event id (as every producer of ours publishes: the server's
        duplicate window kept no other message under that id), else the first fact there (the
        newest is garbage or a later message with other content: the first one stands)."""
        try:
            event = events.decode(data)
        except events.UndecodableEvent:
            event = None
        if event is not None and events.subject_of(event) == subject and msg_id == event.envelope.event_id:
            return event
        first = await self.first_fact(subject)
        return None if first is None else first[1]

    async def _multi_last(self, subjects: list[str]) -> list[tuple[str, bytes, str]]:
        """(subject, payload, its Nats-Msg-Id) of each subject's newest message: JetStream's batched
        direct get (`multi_last`, nats-server 2.11+), answered message by message and ended by status 204;
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
                    self.reads.payload_bytes += sum(len(data or b"") for _s, data, _id in got)
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
                got.append((headers.get("Nats-Subject", ""), msg.data, headers.get("Nats-Msg-Id", "")))
        finally:
            with contextlib.suppress(Exception):
                await sub.unsubscribe()

    async def run_start(self, run_id: str) -> RunStart | None:
        """The run's spec and starter from its `run.started`; None while there is none. ValueError
        (pydantic's) when the recorded spec does not validate: no retry can fix it."""
        event = await self.last_event(run_id, Kind.RUN_STARTED)
        if event is None:
            return None
        return RunStart(RunSpec.of_run(run_id, event.run_started.run_spec_json), event.envelope.producer)

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
        nothing for `patience_s` in a row raises `ReplayIncomplete`. Undecodable payloads, bodies
        not of their subject and later messages on a fact's subject (the first one stands) are
        skipped here (the live consumers dead-letter them)."""
        filters = [events.subject_filter(k, run_id) for k in kinds] if kinds else [events.run_filter(run_id)]
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
                self.reads.payload_bytes += sum(len(m.data or b"") for m in msgs)
                for m in msgs:
                    if not cursor.take(m):
                        break
                    event = checked_event(m, cursor.seen)
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
        events.check_token(run_id, "run id")  # a pattern would follow other runs too
        sub = await self.js.subscribe(events.run_filter(run_id), stream=STREAM, ordered_consumer=True)
        try:
            while stop is None or not stop.is_set():
                try:
                    msg = await sub.next_msg(timeout=poll_s)
                except TimeoutError:
                    continue
                try:
                    event = events.decode(msg.data)
                except events.UndecodableEvent as exc:
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
        pattern = events.subject_filter(kind, run_id, under) if kind else events.run_filter(run_id)
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
        """How the run's attempts ended so far: from the subjects (one request), each lifecycle
        subject that counts checked to hold a fact (garbage on `run.completed` made a run look done)."""
        present = set(await self._subjects(events.run_filter(run_id, "run")))

        async def holds(kind: Kind, key: str | None = None) -> bool:
            subject = events.subject(run_id, kind, key)
            return subject in present and await self.first_fact(subject) is not None

        attempt = 1  # only resumes 2, 3, .. in a row open attempts (`attempts`)
        while await holds(Kind.RUN_RESUMED, str(attempt + 1)):
            attempt += 1
        ended = [a for a in range(1, attempt + 1) if await holds(Kind.RUN_ENDED, str(a))]
        return RunEnds(
            started=await holds(Kind.RUN_STARTED),
            completed=await holds(Kind.RUN_COMPLETED),
            ended=len(ended),
            resumed=attempt - 1,
        )

    async def attempt_misfit(self, run_id: str, event: pb.Event) -> str:
        """Why a `run.ended` / `run.resumed` fits no attempt of the run ('' if it fits): attempt n > 1
        was opened by run.resumed n, which follows run.ended n - 1. One that fits none (attempt 77 of
        a run resumed twice) would otherwise end or reopen the run it names."""
        kind = events.kind_of(event)
        attempt = events.body_of(event).attempt
        first = 1 if kind == Kind.RUN_ENDED else 2
        if attempt < first:
            return f"{kind} of attempt {attempt}: no such attempt"
        if attempt == 1:
            return ""
        # attempt n > 1 was opened by run.resumed n; run.resumed n follows run.ended n - 1
        need = (Kind.RUN_RESUMED, attempt) if kind == Kind.RUN_ENDED else (Kind.RUN_ENDED, attempt - 1)
        if await self.last_event(run_id, need[0], str(need[1])) is None:
            return f"{kind} of attempt {attempt} follows no {need[0]} of attempt {need[1]}"
        return ""
