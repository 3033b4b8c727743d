"""The sampler's scheduling state: which groups are in flight, which wait after a failure, whose
turn it is among open runs, which policy pulls are pending, and the pump's wake-up.

Kept apart from the service, whose handlers fold facts into `RunState` and whose pump asks this
scheduler what may start: the tree policy (`policy.next_expansions`) decides *what* a run needs
next; this decides *how much* of it starts now, and keeps the tasks it started so a stop cancels
them all.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Coroutine, Iterable
from typing import Any

from treegrpo_sampler._state import RunState

RETRY_S = 5.0  # a group whose sampling failed (bus down, missing task folder) is retried after this
GroupDone = Callable[[str, asyncio.Task], None]


class Scheduler:
    """Group and pull tasks of one sampler, its `slots` groups at most at once."""

    def __init__(self, slots: int, retry_s: float = RETRY_S):
        self.slots = slots
        self.retry_s = retry_s
        self._wake = asyncio.Event()
        self._busy: dict[str, asyncio.Task] = {}  # group id -> its sampling task
        self._retry_at: dict[str, float] = {}  # group id -> monotonic time before which it waits
        self._served_at: dict[str, float] = {}  # run -> when the pump last started a group of it
        self._pulls: dict[tuple[str, int], asyncio.Task] = {}  # (run, version) -> its pull task

    # ---- the pump's wake-up -----------------------------------------------------------------
    def wake(self) -> None:
        """Something changed (a fact folded, a group done, a version loaded): look for work."""
        self._wake.set()

    async def wait(self, timeout_s: float = 1.0) -> None:
        """Until woken, or `timeout_s` (a retry's delay ends without a wake)."""
        try:
            await asyncio.wait_for(self._wake.wait(), timeout_s)
        except TimeoutError:
            pass
        self._wake.clear()

    # ---- groups -----------------------------------------------------------------------------
    @property
    def in_flight(self) -> int:
        return len(self._busy)

    def turns(self, runs: Iterable[RunState]) -> tuple[list[RunState], int]:
        """Open runs in turn order (the one served longest ago first) and each one's share of
        the slots."""
        order = sorted((s for s in runs if not s.completed), key=lambda s: self._served_at.get(s.run_id, 0.0))
        return order, max(1, self.slots // max(1, len(order)))

    def free(self, share: int) -> int:
        """How many groups a run with this share may start now."""
        return min(share, self.slots - len(self._busy))

    def held(self) -> set[str]:
        """Group ids no expansion may start now: in flight, or waiting out a failure's delay."""
        now = time.monotonic()
        return set(self._busy) | {gid for gid, at in self._retry_at.items() if at > now}

    def start(self, group_id: str, work: Coroutine[Any, Any, None], done: GroupDone) -> None:
        """Run `work` as the group's task; `done(group_id, task)` once it ends, however."""
        task = asyncio.create_task(work)
        self._busy[group_id] = task
        task.add_done_callback(lambda t: self._finished(group_id, t, done))

    def _finished(self, group_id: str, task: asyncio.Task, done: GroupDone) -> None:
        self._busy.pop(group_id, None)
        done(group_id, task)
        self._wake.set()

    def retry_later(self, group_id: str) -> None:
        """A failed group waits `retry_s` before any expansion may start it again."""
        self._retry_at[group_id] = time.monotonic() + self.retry_s

    def served(self, run_id: str) -> None:
        """The pump started a group of this run: it goes to the back of the turn order."""
        self._served_at[run_id] = time.monotonic()

    # ---- policy pulls -----------------------------------------------------------------------
    def pull(self, key: tuple[str, int], work: Callable[[], Coroutine[Any, Any, None]]) -> None:
        """Start the pull of (run, version) unless one is pending."""
        if key in self._pulls:
            return
        task = asyncio.create_task(work())
        self._pulls[key] = task
        task.add_done_callback(lambda _t: self._pulls.pop(key, None))

    # ---- stop -------------------------------------------------------------------------------
    def cancel(self) -> list[asyncio.Task]:
        """Cancel every group and pull, without waiting; the group tasks cancelled."""
        groups = list(self._busy.values())
        for task in [*groups, *self._pulls.values()]:
            task.cancel()
        return groups

    async def cancel_all(self) -> None:
        """Cancel every group and pull; wait for the groups to unwind."""
        await asyncio.gather(*self.cancel(), return_exceptions=True)
