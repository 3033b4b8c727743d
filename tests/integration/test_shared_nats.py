"""Processes of one $TREEGRPO_HOME share its embedded nats-server (real processes, real flock):
runs opening NATS at the same instant start one server; it outlives the run that started it while
another uses it, and goes away after the last one, even when that one is killed with SIGKILL; a
keeper killed with SIGKILL is started again on the same port by the next check."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from tests.e2e._harness import ROOT, env_for, home_processes, pid_running

pytestmark = pytest.mark.timeout(120)

# what `treegrpo run` does first: open the home's NATS (runner._nats.open_nats), then use it
USER = """
import os, socket, sys, time
from pathlib import Path
from urllib.parse import urlparse
from treegrpo.runner._nats import open_nats
barrier, n = Path(sys.argv[1]), int(sys.argv[2])
(barrier / str(os.getpid())).touch()
while len(list(barrier.iterdir())) < n:  # all start at the same instant, once every one is ready
    time.sleep(0.002)
nats = open_nats()
print(nats.url, flush=True)
while (line := sys.stdin.readline().strip()) in ("ping", "check"):  # answered until stdin closes
    if line == "check":  # what the runner does every turn
        print(repr(nats.check()), flush=True)
        continue
    u = urlparse(nats.url)
    try:
        socket.create_connection((u.hostname, u.port), timeout=2).close()
        print("up", flush=True)
    except OSError:
        print("down", flush=True)
nats.close()
"""


def _users(home, n: int) -> list[subprocess.Popen]:
    barrier = home.parent / f"barrier-{time.monotonic_ns()}"
    barrier.mkdir(parents=True)
    return [
        subprocess.Popen(
            [sys.executable, "-c", USER, str(barrier), str(n)],
            env={
                **env_for(home),
                "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
            },
            cwd=ROOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for _ in range(n)
    ]


def _ping(p: subprocess.Popen) -> str:
    p.stdin.write("ping\n")
    p.stdin.flush()
    return p.stdout.readline().strip()


def _gone_within(home, seconds: float) -> dict[int, str]:
    deadline = time.monotonic() + seconds
    while (left := home_processes(home)) and time.monotonic() < deadline:
        time.sleep(0.1)
    return left


def test_runs_opening_nats_at_the_same_instant_start_one_server_and_leave_none(tmp_path):
    home = tmp_path / "home"
    users = _users(home, 6)
    urls = {p.stdout.readline().strip() for p in users}
    assert len(urls) == 1 and next(iter(urls)).startswith("nats://127.0.0.1:")
    assert all(_ping(p) == "up" for p in users)
    log = (home / "nats" / "data" / "nats-server.log").read_text()
    assert log.count("Starting nats-server") == 1
    for p in users:
        p.stdin.close()
        assert p.wait(30) == 0
    assert _gone_within(home, 0.5) == {}  # the last one out stopped it before it exited


def test_the_server_outlives_the_run_that_started_it_and_goes_with_the_last_even_if_killed(tmp_path):
    home = tmp_path / "home"
    first, second = _users(home, 2)
    assert first.stdout.readline() == second.stdout.readline()
    first.kill()  # SIGKILL: no release, no clean-up of any kind
    first.wait(10)
    time.sleep(2)
    assert _ping(second) == "up"  # the other run still has its server
    second.send_signal(signal.SIGKILL)
    second.wait(10)
    assert _gone_within(home, 5) == {}  # the keeper sees no live lease and stops it


def test_a_keeper_killed_with_sigkill_is_started_again_on_the_same_port_by_the_next_check(tmp_path):
    home = tmp_path / "home"
    (user,) = _users(home, 1)
    url = user.stdout.readline().strip()
    keeper = json.loads((home / "nats" / "keeper.json").read_text())
    os.kill(keeper["pid"], signal.SIGKILL)  # nats-server goes with it (PR_SET_PDEATHSIG)
    deadline = time.monotonic() + 10
    while pid_running(keeper["server_pid"]) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _ping(user) == "down"
    user.stdin.write("check\n")
    user.stdin.flush()
    assert "started it again at " + url in user.stdout.readline()  # the services' URL stays valid
    assert _ping(user) == "up"
    user.stdin.close()
    assert user.wait(30) == 0
    assert _gone_within(home, 0.5) == {}
