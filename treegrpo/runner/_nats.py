"""Which NATS a run uses: an explicit URL, or a lease on the embedded server its home shares."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from treegrpo.config import treegrpo_home
from treegrpo.embedded import SharedNats
from treegrpo.embedded._state import KeeperState


@dataclass
class NatsHandle:
    url: str
    shared: SharedNats | None  # our lease on the home's embedded server (None: a URL we were given)

    @property
    def embedded(self) -> bool:
        return self.shared is not None

    @property
    def store(self) -> Path:
        """The embedded server's JetStream store (where a full disk stops the bus)."""
        state = self.state()
        return Path(state.store) if state else treegrpo_home() / "nats" / "data"

    def state(self) -> KeeperState | None:
        return self.shared.state() if self.shared is not None else None

    def check(self) -> list[str]:
        """Notes for the screen: the embedded server restarted, or its keeper was started again."""
        return self.shared.check() if self.shared is not None else []

    def label(self, what: str, run_id: str = "") -> None:
        if self.shared is not None:
            self.shared.label(what, run_id)

    def close(self) -> None:
        if self.shared is not None:
            self.shared.release()


def open_nats(explicit: str = "", what: str = "") -> NatsHandle:
    if explicit:
        return NatsHandle(explicit, None)
    shared = SharedNats(what=what)
    shared.acquire()
    return NatsHandle(shared.url, shared)
