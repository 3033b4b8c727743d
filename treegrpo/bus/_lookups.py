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


class Lookups:
    """The read side of `Bus` (it needs `self.js`)."""

    async def last_event(self, run_id: str, kind: str, key: str | tuple | None = None) -> pb.Event | None:
        """The latest event on one exact subject (e.g. node X's `node.sampled`), or None."""
        try:
            raw = await self.js.get_last_msg(STREAM, ev_mod.subject(run_id, kind, key), direct=True)
        except NotFoundError:
            return None
        return ev_mod.decode(raw.data)

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
        nothing for `patience_s` in a row raises `ReplayIncomplete`. Undecodable payloads are
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
                    event = _checked(m)
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
        """How the run's attempts ended so far, from the subjects alone (one request)."""
        info = await self.js.stream_info(STREAM, subjects_filter=f"{ev_mod.SUBJECT_ROOT}.{run_id}.run.>")
        kinds = [".".join(s.split(".")[2:4]) for s in (info.state.subjects or {})]
        return RunEnds(
            started=Kind.RUN_STARTED in kinds,
            completed=Kind.RUN_COMPLETED in kinds,
            ended=kinds.count(Kind.RUN_ENDED),
            resumed=kinds.count(Kind.RUN_RESUMED),
        )
