"""Polling the bus for a fact a service is about to publish (integration tests)."""

from __future__ import annotations

import asyncio

from treegrpo.v1 import events_pb2 as pb


async def wait_for_fact(bus, run, kind, key=None, timeout=60.0, poll_s=0.1) -> pb.Event:
    """The fact on (run, kind, key) once it is there; an assertion error after `timeout` seconds."""
    deadline = asyncio.get_running_loop().time() + timeout
    while (ev := await bus.last_event(run, kind, key)) is None:
        assert asyncio.get_running_loop().time() < deadline, f"no {kind} {key} within {timeout}s"
        await asyncio.sleep(poll_s)
    return ev
