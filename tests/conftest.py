"""Shared fixtures. Integration tests get a real nats-server on a free loopback port."""

from __future__ import annotations

import pytest

from treegrpo.embedded import EmbeddedNats


@pytest.fixture
def nats_server(tmp_path):
    """A private JetStream server for one test; stopped by PID afterwards."""
    server = EmbeddedNats(tmp_path / "nats").start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
async def bus(nats_server):
    from treegrpo.bus import Bus

    b = await Bus.connect(nats_server.url, "test/bus", timeout_s=5)
    await b.ensure()
    try:
        yield b
    finally:
        await b.close(2)
