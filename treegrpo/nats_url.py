"""Where the bus is: explicit URL > $TREEGRPO_NATS_URL > the embedded server under $TREEGRPO_HOME."""

from __future__ import annotations

import os

from treegrpo.config import treegrpo_home

DEFAULT_URL = "nats://127.0.0.1:4222"


def embedded_url_file():
    return treegrpo_home() / "nats" / "url"


def resolve_nats_url(explicit: str = "") -> str:
    if explicit:
        return explicit
    if os.environ.get("TREEGRPO_NATS_URL"):
        return os.environ["TREEGRPO_NATS_URL"]
    f = embedded_url_file()
    if f.exists():
        return f.read_text().strip()
    return DEFAULT_URL
