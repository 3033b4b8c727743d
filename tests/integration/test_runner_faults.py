"""The runner's fault watch (real nats-server, real file systems): low free space and a NATS that
went down are shown within seconds, once each, and said again when they clear."""

from __future__ import annotations

import asyncio
import time

import pytest

from treegrpo.bus import Bus
from treegrpo.runner._faults import FaultWatch

pytestmark = pytest.mark.timeout(60)


async def test_low_disk_is_shown_once_and_cleared(bus, tmp_path):
    watch = FaultWatch(bus, {"$TREEGRPO_HOME": tmp_path}, min_free_mb=1e12)  # no disk has 1 EB free
    first = watch.check()
    assert len(first) == 1 and "low disk" in first[0] and str(tmp_path) in first[0]
    assert watch.check() == [] and watch.lines == first  # shown once, kept under the table
    watch.min_free_mb = 0
    assert watch.check() == [f"cleared: {first[0]}"] and watch.lines == []


async def test_a_nats_server_that_went_down_is_shown_within_seconds(nats_server):
    bus = await Bus.connect(nats_server.url, "test/runner", 5)
    watch = FaultWatch(bus, {}, min_free_mb=0)
    try:
        assert watch.check() == []
        nats_server.stop()
        started, notes = time.monotonic(), []
        while not notes and time.monotonic() - started < 15:
            await asyncio.sleep(0.2)
            notes = watch.check()
        assert notes and "unreachable" in notes[0], notes
        assert time.monotonic() - started < 15
        nats_server.start()
        while not (notes := watch.check()) and time.monotonic() - started < 40:
            await asyncio.sleep(0.2)
        assert notes and notes[0].startswith("cleared:")
    finally:
        await bus.close(2)
