"""A replay's read position: where it is in the stream, and how long the server has given nothing.

A replay reads through an ephemeral consumer with ack policy none, so a message the server sent
but the client never got (a connection dropped mid-batch) is not sent again: the consumer's own
sequence skips. The cursor notices the skip, or a fetch that times out, and opens a new consumer
just after the last stream sequence handed out; only a server silent for `patience_s` in a row
ends the replay, with `ReplayIncomplete`, never a shorter history (exports, reports and the
learner's restore read through it).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time

from nats.js import api

from treegrpo import events
from treegrpo.bus._errors import ReplayIncomplete
from treegrpo.bus._names import STREAM
from treegrpo.v1 import events_pb2 as pb

log = logging.getLogger(__name__)

REPLAY_PATIENCE_S = 60.0  # a server silent this long in a row ends a replay with ReplayIncomplete
REPLAY_FETCH_S = 5.0  # one fetch's wait


class Cursor:
    def __init__(self, run_id: str, patience_s: float):
        self.run_id, self.patience_s = run_id, patience_s
        self.sub = None
        self.last = 0  # stream sequence of the last message taken
        self.next_consumer_seq = 1
        self.remaining = 0  # messages of the filter still ahead, as the server last said
        self.answered_at = time.monotonic()  # when the server last answered this replay
        self.reopened = 0
        self.seen: set[str] = set()  # subjects handed out: a fact's subject holds one fact

    async def open(self, js, filters: list[str]) -> None:
        after = (
            {"deliver_policy": api.DeliverPolicy.BY_START_SEQUENCE, "opt_start_seq": self.last + 1}
            if self.last
            else {"deliver_policy": api.DeliverPolicy.ALL}
        )
        cfg = api.ConsumerConfig(
            filter_subjects=filters,
            ack_policy=api.AckPolicy.NONE,
            inactive_threshold=60.0,
            max_ack_pending=-1,
            **after,
        )
        sub = await js.pull_subscribe(filters[0], durable=None, stream=STREAM, config=cfg)
        try:
            self.remaining = (await sub.consumer_info()).num_pending
        except BaseException:
            await _unsubscribe(sub)
            raise
        self.sub, self.next_consumer_seq = sub, 1
        self.answered_at = time.monotonic()

    def take(self, m) -> bool:
        """Whether `m` is the next message; False (the consumer dropped) after a lost one."""
        meta = m.metadata
        if meta.sequence.consumer != self.next_consumer_seq or meta.sequence.stream <= self.last:
            log.warning(
                "replay of %s: consumer sequence %d, expected %d; re-reading after stream sequence %d",
                self.run_id,
                meta.sequence.consumer,
                self.next_consumer_seq,
                self.last,
            )
            self._drop()
            return False
        self.next_consumer_seq += 1
        self.last = meta.sequence.stream
        self.remaining = meta.num_pending
        self.answered_at = time.monotonic()
        return True

    async def stalled(self, exc: BaseException) -> None:
        """A fetch (or the consumer's creation) got no answer: give up after `patience_s` silent."""
        silent = time.monotonic() - self.answered_at
        if silent >= self.patience_s:
            raise ReplayIncomplete(
                f"replay of run {self.run_id} incomplete: no answer from NATS for "
                f"{silent:.0f} s after stream sequence {self.last} "
                f"({self.remaining} event(s) still ahead; last error {type(exc).__name__}: {exc})"
            ) from exc
        self.reopened += 1
        log.warning(
            "replay of %s stalled (%s); re-reading after %d", self.run_id, type(exc).__name__, self.last
        )
        await self._drop_async()
        await asyncio.sleep(min(1.0, 0.1 * self.reopened))

    def _drop(self) -> None:
        if self.sub is not None:
            asyncio.ensure_future(_unsubscribe(self.sub))
        self.sub = None

    async def _drop_async(self) -> None:
        sub, self.sub = self.sub, None
        if sub is not None:
            await _unsubscribe(sub)

    async def close(self) -> None:
        await self._drop_async()


def checked_event(m, seen: set[str]) -> pb.Event | None:
    """The event in `m`, or None (logged) when its body is undecodable, not of its subject, or not
    the first message on its subject (a fact is immutable: the first one stands)."""
    try:
        event = events.decode(m.data)
    except events.UndecodableEvent:
        log.warning("replay skipped undecodable message %s", m.metadata.sequence.stream)
        return None
    if events.subject_of(event) != m.subject:
        log.warning("replay skipped %s: body does not match its subject", m.subject)
        return None
    if m.subject in seen:
        log.warning("replay skipped %s at %d: not its first message", m.subject, m.metadata.sequence.stream)
        return None
    seen.add(m.subject)
    return event


async def _unsubscribe(sub) -> None:
    # the ephemeral consumer expires on its own (inactive_threshold) when this cannot reach the server
    with contextlib.suppress(Exception):
        await asyncio.wait_for(sub.unsubscribe(), 2.0)
