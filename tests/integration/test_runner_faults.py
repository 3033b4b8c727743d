"""The runner's fault watch (real nats-server, real file systems): low free space, a NATS that went
down and services whose bus writes fail are shown within seconds, once each, said again when they
clear; a bus that takes no writes for `bus_wait_s` becomes the run's stop reason.

Imports a private module: `treegrpo.runner._faults`, `treegrpo.runner._nats` (what these tests exercise
is not on the package's public surface).
"""

from __future__ import annotations

import asyncio
import time

import pytest

from tests.unit.test_health import beat
from treegrpo.bus import Bus
from treegrpo.runner._faults import FaultWatch
from treegrpo.runner._nats import NatsHandle

pytestmark = pytest.mark.timeout(60)


async def test_low_disk_is_shown_once_and_cleared(bus, tmp_path):
    nats = NatsHandle("nats://127.0.0.1:1", None)
    watch = FaultWatch(bus, nats, {"$TREEGRPO_HOME": tmp_path}, min_free_mb=1e12)  # no disk has 1 EB free
    first = watch.check()
    assert len(first) == 1 and "low disk" in first[0] and str(tmp_path) in first[0]
    assert watch.check() == [] and watch.lines == first  # shown once, kept under the table
    watch.min_free_mb = 0
    assert watch.check() == ["cleared: " + first[0].split(";")[0]] and watch.lines == []


async def test_a_nats_server_that_went_down_is_shown_within_seconds_and_stops_the_run_after_the_wait(
    nats_server,
):
    bus = await Bus.connect(nats_server.url, "test/runner", 5)
    watch = FaultWatch(bus, NatsHandle(nats_server.url, None), {}, min_free_mb=0, bus_wait_s=3)
    try:
        assert watch.check() == [] and watch.stop_reason() is None
        nats_server.stop()
        started, notes = time.monotonic(), []
        while not notes and time.monotonic() - started < 15:
            await asyncio.sleep(0.2)
            notes = watch.check()
        assert notes and "unreachable" in notes[0] and "stops (resumable) in" in notes[0], notes
        assert time.monotonic() - started < 15
        while watch.stop_reason() is None and time.monotonic() - started < 20:
            await asyncio.sleep(0.2)
            watch.check()
        assert watch.stop_reason() is not None and nats_server.url in watch.stop_reason().what
        nats_server.start()
        while not (notes := watch.check()) and time.monotonic() - started < 40:
            await asyncio.sleep(0.2)
        assert notes and notes[0].startswith("cleared:") and watch.stop_reason() is None
    finally:
        await bus.close(2)


async def test_services_whose_bus_writes_fail_are_named_in_one_line(bus):
    beats = [
        beat(
            service="sampler",
            bus_error="no acknowledgement from NATS in time",
            bus_error_since=time.time() - 30,
        ),
        beat(
            service="grader",
            bus_error="no acknowledgement from NATS in time",
            bus_error_since=time.time() - 5,
        ),
        beat(service="executor"),
    ]
    watch = FaultWatch(bus, NatsHandle("nats://x:1", None), {}, 0, bus_wait_s=20, beats=lambda: beats)
    (note,) = watch.check()
    assert (
        note.startswith("sampler, grader cannot write to the bus: no acknowledgement") and "(for 30s)" in note
    )
    assert watch.stop_reason() is not None  # 30 s without writes > bus_wait_s = 20 s
