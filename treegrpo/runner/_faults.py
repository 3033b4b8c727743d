"""Faults a person running `treegrpo run` should see at once, not find in a log later.

Checked every turn of the runner's loop (cheap: a statfs per folder, a flag of the connection):
free space under $TREEGRPO_HOME and the NATS store below `runner.min_free_mb`, and the runner's own
NATS connection being down. Each is shown when it starts and when it clears, not every turn.
A full disk or a NATS outage is transient (space comes back, the server restarts; nothing is lost,
the services retry), so these warn; the run stops only on permanent faults (the supervisor's).
"""

from __future__ import annotations

import shutil
from pathlib import Path

from treegrpo import events as ev_mod
from treegrpo.bus import Bus
from treegrpo.v1 import events_pb2 as pb


class FaultWatch:
    def __init__(self, bus: Bus, folders: dict[str, Path], min_free_mb: float, url: str = ""):
        self.bus, self.folders, self.min_free_mb, self.url = bus, folders, min_free_mb, url
        self.active: dict[str, str] = {}  # fault key -> its line, while it lasts

    def check(self) -> list[str]:
        """Lines for faults that began or cleared since the last call."""
        now: dict[str, str] = {}
        for what, folder in self.folders.items():
            line = self._disk(what, folder)
            if line:
                now[f"disk:{folder}"] = line
        line = self._nats()
        if line:
            now["nats"] = line
        notes = [line for key, line in now.items() if key not in self.active]
        notes += [f"cleared: {line}" for key, line in self.active.items() if key not in now]
        self.active = now
        return notes

    def _disk(self, what: str, folder: Path) -> str:
        probe = folder if folder.exists() else folder.parent
        try:
            free_mb = shutil.disk_usage(probe).free / 1e6
        except OSError:
            return ""
        if free_mb >= self.min_free_mb:
            return ""
        return (
            f"low disk: {free_mb:,.0f} MB free under {what} {folder} (< runner.min_free_mb = "
            f"{self.min_free_mb:,.0f}); a full disk stops NATS and checkpoints"
        )

    def _nats(self) -> str:
        if self.bus.nc.is_connected:
            return ""
        return f"NATS {self.url or 'server'} is unreachable; the services wait and retry"

    @property
    def lines(self) -> list[str]:
        return list(self.active.values())


def restored_line(fact: pb.LearnerRestored) -> str:
    """A learner restore that skipped a damaged copy or lost state ('' for a clean one): the run
    goes on, but the user should know its optimizer state was reset or its steps re-trained."""
    if not (fact.skipped or fact.lost):
        return ""
    return f'{ev_mod.describe_restored(fact)} (docs/LEARNER.md, "Restoring")'
