"""Reading the log back: one fact by subject, a run's events in order, the runs, a run's ends."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass

import nats.errors
from nats.js.errors import NotFoundError

from treegrpo import events as ev_mod
from treegrpo.bus._names import STREAM
from treegrpo.bus._replay import REPLAY_FETCH_S, REPLAY_PATIENCE_S, _checked, _Cursor
from treegrpo.events import Kind
from treegrpo.v1 import events_pb2 as pb

log = logging.getLogger(__name__)


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


def attempts(ended: Iterable[int], resumed: Iterable[int]) -> tuple[int, int]:
    """(the run's attempt, how many of its attempts ended): only resumes 2, 3, .. k in a row open
    attempts, and only ends of attempts 1 .. k count, so a fact of an attempt that never was (a
    forgery, fuzz) neither ends nor reopens a run."""
    opened, attempt = set(resumed), 1
    while attempt + 1 in opened:
        attempt += 1
    return attempt, len({a for a in ended if 1 <= a <= attempt})


class Lookups:
    """The read side of `Bus` (it needs `self.js`)."""

    async def last_event(self, run_id: str, kind: str, key: str | tuple | None = None) -> pb.Event | None:
        """The fact on one exact subject (e.g. node X's `node.sampled`), or None.

        The *first* fact there, whatever its name says (kept for its many callers): a fact is
        immutable and its subject holds one, so a later message on the subject with other content is
        a forgery or a bug (consumers dead-letter it, replays skip it) and never supersedes the fact."""
        first = await self.first_fact(ev_mod.subject(run_id, kind, key))
        return None if first is None else first[1]

    async def first_fact(self, subject: str) -> tuple[int, pb.Event] | None:
        """(stream sequence, event) of the first message on `subject` that decodes and belongs on it,
        or None. Garbage before it (fuzz, a corrupt writer: dead-lettered by the consumers) is
        stepped over, one direct get each; a clean subject costs one."""
        seq = 1
        while True:
            try:
                raw = await self.js.get_msg(STREAM, seq=seq, subject=subject, direct=True, next=True)
            except NotFoundError:
                return None
            try:
                event = ev_mod.decode(raw.data or b"")
            except ev_mod.UndecodableEvent:
                event = None
            if event is not None and ev_mod.subject_of(event) == subject:
                return raw.seq, event
            seq = raw.seq + 1

    async def replay(
        self,
        run_id: str,
        kinds: Iterable[str] | None = None,
        batch: int = 512,
        patience_s: float = REPLAY_PATIENCE_S,
    ) -> AsyncIterator[tuple[int, pb.Event]]:
        """Every event of a run (optionally of some kinds), in stream order, up to the current end.

        Never short: it ends only when the server says nothing is left. A fetch that times out, a
        connection that drops, or a message lost in transit (the consumer's own sequence skips: its
        ack policy is none) re-opens the read after the last event handed out; a server that gives
        nothing for `patience_s` in a row raises `ReplayIncomplete`. Undecodable payloads, bodies
        not of their subject and later messages on a fact's subject (the first one stands) are
        skipped here (the live consumers dead-letter them)."""
        filters = (
            [ev_mod.subject_filter(k, run_id) for k in kinds]
            if kinds
            else [f"{ev_mod.SUBJECT_ROOT}.{run_id}.>"]
        )
        cursor = _Cursor(run_id, patience_s)
        try:
            while True:
                try:
                    if cursor.sub is None:
                        await cursor.open(self.js, filters)
                    if cursor.remaining <= 0:
                        return
                    msgs = await cursor.sub.fetch(min(batch, cursor.remaining), timeout=REPLAY_FETCH_S)
                except (TimeoutError, OSError, nats.errors.Error) as exc:
                    await cursor.stalled(exc)
                    continue
                for m in msgs:
                    if not cursor.take(m):
                        break
                    event = _checked(m, cursor.seen)
                    if event is not None:
                        yield m.metadata.sequence.stream, event
        finally:
            await cursor.close()

    async def run_ids(self) -> list[str]:
        """Run ids that have a run.started event, sorted by name. The runner's ids are
        `YYYYmmdd_HHMMSS_<6 hex>` (UTC), so for them name order is start order to the second (ids of one
        second in hex order); ids chosen by hand or imported sort by name wherever their time falls."""
        info = await self.js.stream_info(STREAM, subjects_filter=f"{ev_mod.SUBJECT_ROOT}.*.run.started")
        subjects = sorted((info.state.subjects or {}).keys())
        return [s.split(".")[1] for s in subjects]

    async def run_ends(self, run_id: str) -> RunEnds:
        """How the run's attempts ended so far: from the subjects (one request), each lifecycle
        subject that counts checked to hold a fact (garbage on `run.completed` made a run look done)."""
        info = await self.js.stream_info(STREAM, subjects_filter=f"{ev_mod.SUBJECT_ROOT}.{run_id}.run.>")
        present = set(info.state.subjects or {})

        async def holds(kind: Kind, key: str | None = None) -> bool:
            subject = ev_mod.subject(run_id, kind, key)
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
        kind = ev_mod.kind_of(event)
        attempt = ev_mod.body_of(event).attempt
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
