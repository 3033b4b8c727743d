"""Shared fixtures. Integration tests get a real nats-server on a free loopback port."""

from __future__ import annotations

import os

# before anything imports torch: spin-waiting OpenMP threads make torch 10-40x slower on shared cores
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import pytest  # noqa: E402

from treegrpo.embedded import EmbeddedNats  # noqa: E402


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


@pytest.fixture(autouse=True)
def _heartbeats_under_tmp(tmp_path, monkeypatch):
    """Services run in-process write their heartbeat under the test's tmp dir, not ~/.treegrpo."""
    import treegrpo.health

    monkeypatch.setattr(treegrpo.health, "treegrpo_home", lambda: tmp_path / "treegrpo-home")
