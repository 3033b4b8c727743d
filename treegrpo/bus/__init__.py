"""The event bus: NATS JetStream as the log of every fact, plus its object store for blobs."""

from treegrpo.bus._client import (
    ADAPTERS,
    DLQ_ROOT,
    DLQ_STREAM,
    STREAM,
    SUBMISSIONS,
    Bus,
    file_sha256,
)
from treegrpo.bus._consumer import Consumer, ConsumerOptions, Delivery, Handler
from treegrpo.bus._errors import (
    BusUnavailable,
    BusWriteError,
    Deferred,
    ObjectDamaged,
    ObjectMissing,
    PermanentError,
    ReplayIncomplete,
    TransientError,
)
from treegrpo.bus._reads import Reads, RunEnds, RunStart, attempts
from treegrpo.bus._writes import WriteHealth, bus_fault_in, is_write_failure

__all__ = [
    "ADAPTERS",
    "DLQ_ROOT",
    "DLQ_STREAM",
    "STREAM",
    "SUBMISSIONS",
    "Bus",
    "BusUnavailable",
    "BusWriteError",
    "Consumer",
    "ConsumerOptions",
    "Delivery",
    "Handler",
    "Deferred",
    "ObjectDamaged",
    "ObjectMissing",
    "PermanentError",
    "Reads",
    "ReplayIncomplete",
    "RunEnds",
    "RunStart",
    "TransientError",
    "WriteHealth",
    "attempts",
    "bus_fault_in",
    "file_sha256",
    "is_write_failure",
]
