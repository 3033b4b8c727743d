"""Writes the bus did not take, told apart from a handler's own failures.

A publish that gets no ack in time, on a connection that is down, or an ack that says the stream's
store is full or failing (JetStream's resource and store errors) is the infrastructure's fault,
not the message's: `Bus` raises `BusWriteError` for it, and remembers since when its writes fail
(`Bus.writes`, cleared by the next write that succeeds). The service's heartbeat carries that, so
the runner and `treegrpo health` can say "the sampler cannot write to the bus since 40 s: ...";
and a consumer never dead-letters a message while its bus does not take writes (it would be lost
for a full disk, not for anything in it).

A full disk under nats-server 2.15 gives no error ack at all: the publish just times out (the
server logs "Critical write error ... no space left on device"). So timeouts count as write
failures too; the embedded server's keeper reads the server's log for the cause.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import ParamSpec, TypeVar

import nats.errors
from nats.js.errors import APIError

from treegrpo.bus._errors import BusWriteError

# resource limits exceeded (account / insufficient / memory / storage), stream store failed
STORE_ERROR_CODES = frozenset({10002, 10023, 10028, 10047, 10077})
WRITE_FAILURES = (
    TimeoutError,  # nats.errors.TimeoutError too: no ack in time
    nats.errors.ConnectionClosedError,
    nats.errors.ConnectionReconnectingError,
    nats.errors.NoRespondersError,  # JetStream not (yet) serving
    nats.errors.OutboundBufferLimitError,
    nats.errors.StaleConnectionError,
)


# what only NATS raises: the bus is down, unreachable or cannot store (a plain TimeoutError may be anyone's)
BUS_FAULTS = (
    nats.errors.TimeoutError,
    nats.errors.ConnectionClosedError,
    nats.errors.ConnectionReconnectingError,
    nats.errors.NoRespondersError,
    nats.errors.OutboundBufferLimitError,
    nats.errors.StaleConnectionError,
)


def bus_fault_in(exc: BaseException | None) -> BaseException | None:
    """The bus outage behind `exc` (itself, or what it was raised from), or None: a handler that
    failed because NATS was down or full has done nothing wrong, and its message must neither be
    dead-lettered nor recorded as an infrastructure fault of the node (it would be lost)."""
    seen = 0
    while exc is not None and seen < 10:
        if isinstance(exc, (BusWriteError, *BUS_FAULTS)) or (
            isinstance(exc, APIError) and is_write_failure(exc)
        ):
            return exc
        exc, seen = exc.__cause__ or exc.__context__, seen + 1
    return None


def is_write_failure(exc: BaseException) -> bool:
    if isinstance(exc, APIError):
        return exc.err_code in STORE_ERROR_CODES or exc.code == 503
    return isinstance(exc, WRITE_FAILURES)


def describe(exc: BaseException) -> str:
    if isinstance(exc, APIError):
        return f"JetStream error {exc.err_code}: {exc.description}"
    if isinstance(exc, TimeoutError):
        return "no acknowledgement from NATS in time (server down, overloaded, or its store full)"
    return f"{type(exc).__name__}: {exc}".rstrip(": ")


@dataclass
class WriteHealth:
    error: str = ""  # the latest failure while writes keep failing ("": the last write went through)
    since: float = 0.0  # unix time of the first failure of this streak
    failures: int = 0

    def failed(self, exc: BaseException) -> None:
        self.error = describe(exc)
        self.since = self.since or time.time()
        self.failures += 1

    def ok(self) -> None:
        self.error, self.since = "", 0.0


P = ParamSpec("P")
T = TypeVar("T")


def write(fn: Callable[P, Awaitable[T]]) -> Callable[P, Awaitable[T]]:
    """Mark a `Bus` method as a write: its infrastructure failures become `BusWriteError`."""

    @functools.wraps(fn)
    async def guarded(self, *args, **kwargs):
        try:
            result = await fn(self, *args, **kwargs)
        except Exception as exc:
            if isinstance(exc, BusWriteError) or not is_write_failure(exc):
                raise
            self.writes.failed(exc)
            raise BusWriteError(f"bus write failed: {self.writes.error}") from exc
        self.writes.ok()
        return result

    return guarded
