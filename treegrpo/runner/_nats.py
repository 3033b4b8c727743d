"""Which NATS a run uses: an explicit URL, the server `treegrpo nats up` runs, or a private one."""

from __future__ import annotations

import socket
from dataclasses import dataclass
from urllib.parse import urlparse

from treegrpo.config import treegrpo_home
from treegrpo.embedded import EmbeddedNats, free_port
from treegrpo.nats_url import embedded_url_file


@dataclass
class NatsHandle:
    url: str
    server: EmbeddedNats | None  # ours to stop (and to restart if it dies)

    def check(self) -> str | None:
        """Restart our server if it died (same port, same store: nothing is lost)."""
        if self.server is not None and self.server.proc is not None and self.server.proc.poll() is not None:
            self.server.start()
            return f"nats-server exited ({self.server.proc.returncode}); restarted"
        return None

    def close(self) -> None:
        if self.server is not None:
            self.server.stop()
            f = embedded_url_file()
            if f.exists() and f.read_text().strip() == self.url:
                f.unlink()


def _reachable(url: str) -> bool:
    u = urlparse(url)
    try:
        with socket.create_connection((u.hostname or "127.0.0.1", u.port or 4222), timeout=0.5):
            return True
    except OSError:
        return False


def open_nats(explicit: str = "") -> NatsHandle:
    if explicit:
        return NatsHandle(explicit, None)
    f = embedded_url_file()
    if f.exists() and _reachable(f.read_text().strip()):
        return NatsHandle(f.read_text().strip(), None)
    store = treegrpo_home() / "nats" / "data"
    server = EmbeddedNats(store, port=free_port()).start()
    f.parent.mkdir(parents=True, exist_ok=True)
    f.write_text(server.url + "\n")
    return NatsHandle(server.url, server)
