"""Where the bus is: explicit URL > $TREEGRPO_NATS_URL > the embedded server under $TREEGRPO_HOME."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Sequence

from treegrpo.config import treegrpo_home

DEFAULT_URL = "nats://127.0.0.1:4222"


def server_list(url: str | Sequence[str]) -> list[str]:
    """The servers of a URL setting: one URL, a comma-separated list (a cluster's servers, as
    `nats://a:4222,nats://b:4222`), or a list of them. The client fails over between them."""
    parts = url.split(",") if isinstance(url, str) else [p for u in url for p in u.split(",")]
    return [p.strip() for p in parts if p.strip()]


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


@contextlib.contextmanager
def nats_for(explicit: str = "", what: str = "") -> Iterator[str]:
    """The URL a command reads the log from, held for the `with` block. A given URL (or
    $TREEGRPO_NATS_URL) as is; else, when this home has an embedded server's store, a lease on that
    server, started if no run keeps it up now (`treegrpo report RUN` after the run ended) and
    stopped again afterwards if nobody else uses it; else the default URL."""
    if explicit or os.environ.get("TREEGRPO_NATS_URL"):
        yield resolve_nats_url(explicit)
        return
    if not (treegrpo_home() / "nats" / "data").exists():
        yield resolve_nats_url()
        return
    from treegrpo.embedded import SharedNats

    with SharedNats(what=what) as shared:
        yield shared.url
