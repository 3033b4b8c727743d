"""Faults a person running `treegrpo run` should see at once, not find in a log later.

Checked every turn of the runner's loop (cheap: a statfs per folder, a flag of the connection, a
small JSON file from the embedded server's keeper, the services' heartbeats), in the words of
`treegrpo.findings`: low disk under $TREEGRPO_HOME or the NATS store, the store failing its writes
(a full disk), the embedded server down, the runner's own NATS connection lost, the services'
writes to the bus failing. Each is printed when it begins and when it clears, and stays under the
progress table while it lasts.

A full disk or a lost NATS is transient (space comes back, the server restarts; nothing is lost,
the services retry), so the run waits for it, saying so with a countdown; after
`runner.bus_wait_s` without writes the run stops, resumable, with one line naming the cause, the fix
and the `--resume` command (`stop_reason`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from treegrpo import events
from treegrpo.bus import Bus
from treegrpo.findings import (
    Finding,
    connection_findings,
    disk_findings,
    heartbeat_findings,
    store_findings,
)
from treegrpo.health import Heartbeat
from treegrpo.runner._nats import NatsHandle
from treegrpo.v1 import events_pb2 as pb


class FaultWatch:
    def __init__(
        self,
        bus: Bus,
        nats: NatsHandle,
        folders: dict[str, Path],
        min_free_mb: float,
        bus_wait_s: float = 0.0,
        beats: Callable[[], list[Heartbeat]] = list,
    ):
        self.bus, self.nats, self.folders = bus, nats, folders
        self.min_free_mb, self.bus_wait_s, self.beats = min_free_mb, bus_wait_s, beats
        self.active: dict[str, Finding] = {}
        self._down_since = 0.0  # when the runner's own connection went down (0: up)

    def findings(self) -> list[Finding]:
        now = time.time()
        if self.bus.connected:
            self._down_since = 0.0
        else:
            self._down_since = self._down_since or now
        keeper_log = self.nats.shared.paths.keeper_log if self.nats.shared else None
        return [
            *store_findings(self.nats.state(), keeper_log),
            *connection_findings(self.nats.url, self._down_since, self.nats.embedded),
            *heartbeat_findings(self.beats()),
            *disk_findings(self.folders, self.min_free_mb),
        ]

    def check(self) -> list[str]:
        """Lines for faults that began or cleared since the last call."""
        now = {f.key: f for f in self.findings()}
        begun = [f for key, f in now.items() if key not in self.active]
        cleared = [f"cleared: {f.what}" for key, f in self.active.items() if key not in now]
        self.active = now
        return [*map(self._line, begun), *cleared]

    def down_since(self) -> float:
        """Since when the bus has taken no writes, as far as the runner can tell (0: it does)."""
        return min((f.since or time.time() for f in self.active.values() if f.bus), default=0.0)

    def stop_reason(self) -> Finding | None:
        """The fault to stop the run for: the bus took no writes for longer than `bus_wait_s`."""
        since = self.down_since()
        if not (self.bus_wait_s and since and time.time() - since > self.bus_wait_s):
            return None
        return next(f for f in self.active.values() if f.bus)  # the most specific one comes first

    def _line(self, f: Finding) -> str:
        line = f.line()
        since = self.down_since()
        if f.bus and self.bus_wait_s and since:
            left = max(0.0, self.bus_wait_s - (time.time() - since))
            line += f" — the run stops (resumable) in {left:,.0f}s unless writes resume"
        return line

    @property
    def lines(self) -> list[str]:
        return [self._line(f) for f in self.active.values()]


def restored_line(fact: pb.LearnerRestored) -> str:
    """A learner restore that skipped a damaged copy or lost state ('' for a clean one): the run
    goes on, but the user should know its optimizer state was reset or its steps re-trained."""
    if not (fact.skipped or fact.lost):
        return ""
    return f'{events.describe_restored(fact)} (docs/LEARNER.md, "Restoring")'
