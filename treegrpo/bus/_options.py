"""What a consumer's handler is given, and how a consumer is tuned."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from nats.js import api

from treegrpo.v1 import events_pb2 as pb


@dataclass(frozen=True)
class Delivery:
    subject: str
    stream_seq: int
    num_delivered: int


Handler = Callable[[pb.Event, Delivery], Awaitable[None]]


@dataclass
class ConsumerOptions:
    max_inflight: int = 1  # handlers running at once
    ack_wait_s: float = 30.0  # redelivery after this long without ack or heartbeat
    max_deliver: int = 10  # then dead-letter
    fetch_timeout_s: float = 1.0  # the loop's one bounded await
    backoff_s: float = 0.5  # first nak delay for unexpected errors, doubled per delivery
    backoff_max_s: float = 30.0


def durable_config(durable: str, filters: list[str], opt: ConsumerOptions) -> api.ConsumerConfig:
    """A service's durable pull consumer: explicit acks, every message, redelivered after ack_wait."""
    return api.ConsumerConfig(
        durable_name=durable,
        name=durable,
        filter_subjects=filters,
        ack_policy=api.AckPolicy.EXPLICIT,
        deliver_policy=api.DeliverPolicy.ALL,
        ack_wait=opt.ack_wait_s,
        max_deliver=-1,
        max_ack_pending=max(1000, 4 * opt.max_inflight),
        # none given: the consumer takes the stream's own count. Asking for more than the
        # stream has is refused for good (400, err_code 10126), whatever the services were told
        num_replicas=None,
    )
