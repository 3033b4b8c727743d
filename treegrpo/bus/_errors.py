"""How a handler tells the consumer loop what went wrong (classified at the edge)."""

from __future__ import annotations


class TransientError(Exception):
    """Try again later: the message is nak'ed with `delay_s` and redelivered."""

    def __init__(self, reason: str, delay_s: float = 1.0):
        super().__init__(reason)
        self.reason = reason
        self.delay_s = delay_s


class Deferred(TransientError):
    """Not a failure: the message must wait for something else to finish first (an unscoped
    learner busy with another run). Nak'ed with `delay_s` and redelivered for as long as it takes:
    a deferral never counts toward `max_deliver`, so a waiting run's facts are never dead-lettered."""


class BusWriteError(TransientError):
    """The bus did not take a write (no ack in time, the connection down, the store full or
    failing), or was not there to read from: an outage, never the message's fault. Retried; never
    dead-lettered nor recorded as a node's infrastructure fault for it (`treegrpo/bus/_writes.py`)."""

    def __init__(self, reason: str, delay_s: float = 2.0):
        super().__init__(reason, delay_s)


class ReplayIncomplete(BusWriteError):
    """A replay could not read the run's whole history: the server gave nothing for its patience.
    Never a shorter history in its place; a handler that raises it is retried like any outage."""


class PermanentError(Exception):
    """Retrying cannot help: the message is term'ed and dead-lettered with the reason."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


class BusUnavailable(ConnectionError):
    """NATS could not be reached within the configured time."""


class ObjectMissing(LookupError):
    """The object store has no object under that key."""


class ObjectDamaged(ValueError):
    """The object's bytes do not match their recorded digest, or its metadata does not read."""
