"""Dead letters: a message no retry can help, kept with the reason on `tgdlq.<owner>.<run>`."""

from __future__ import annotations

from treegrpo import events
from treegrpo.bus._client import Bus
from treegrpo.bus._names import DLQ_ROOT
from treegrpo.bus._options import Delivery
from treegrpo.v1 import events_pb2 as pb


async def dead_letter(
    bus: Bus, durable: str, owner: str, msg, delivery: Delivery, reason: str, run_id: str
) -> None:
    """Publish the dead letter (the payload's first 512 KiB), then term the message."""
    body = pb.DeadLettered(
        consumer=durable,
        subject=delivery.subject,
        reason=reason,
        payload=bytes(msg.data[: 512 * 1024]),
        stream_seq=delivery.stream_seq,
    )
    event = events.make_event(run_id or "unknown", bus.producer, body)
    subject = f"{DLQ_ROOT}.{owner}.{run_id or 'unknown'}"
    await bus.publish_raw(subject, events.encode(event), headers=bus.headers_for(event))
    await msg.term()


def run_of(subject: str) -> str:
    return events.run_of(subject) or "unknown"
