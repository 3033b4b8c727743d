"""An executor that cannot run anything fails the run fast (real `treegrpo run`, real processes).

The fault is injected from outside: the sandbox's interpreter does not exist. Before issue 25
every node was retried ten times, dead-lettered, and the run waited out `runner.timeout_s`
(300 s here) with nothing on screen but a growing error count; now the executor masks the first
nodes as infrastructure faults, stops as a permanent fault, and the run ends with its reason.
"""

from __future__ import annotations

import subprocess
import time

import pytest

from tests.e2e._harness import ROOT, env_for, prepare_home, read_log, run_argv, run_ids
from treegrpo.events import INFRASTRUCTURE, Kind

pytestmark = [pytest.mark.slow, pytest.mark.timeout(420)]


def test_a_run_whose_executor_cannot_run_scripts_stops_at_once_with_the_reason(tmp_path):
    home = tmp_path / "home"
    model = prepare_home(home)
    src = home / "replay"  # completions with code, so that nodes reach the sandbox
    src.mkdir()
    (src / "hello.py").write_text("print('hello')\n")
    argv = run_argv(
        "treegrpo/examples/run-small.toml",
        sets=(
            f'sampler.model="{model}"',
            f'learner.model="{model}"',
            'sampler.backend="replay"',
            f'sampler.replay.source_dir="{src}"',
            "runner.timeout_s=300",
            "run.rounds=1",
            f'executor.local.python="{tmp_path / "no-such-env" / "bin" / "python"}"',
        ),
    )
    started = time.monotonic()
    done = subprocess.run(argv, env=env_for(home), cwd=ROOT, capture_output=True, text=True, timeout=400)
    took = time.monotonic() - started
    screen = done.stdout + done.stderr
    assert done.returncode == 1, screen[-3000:]
    assert "the executor cannot run scripts" in screen and "sandbox setup failed" in screen, screen[-3000:]
    assert "Traceback" not in screen
    assert took < 150, f"took {took:.0f}s (runner.timeout_s is 300)"
    (run_id,) = run_ids(home)
    log = read_log(home, run_id)
    assert log.counts[Kind.RUN_ENDED] == 1
    assert log.graded_status[INFRASTRUCTURE] >= 3 and log.graded_status.keys() <= {INFRASTRUCTURE}


def _executed(url: str, run_id: str) -> list:
    import asyncio

    from treegrpo.bus import Bus

    async def go():
        bus = await Bus.connect(url, "test/watch", 10)
        try:
            return [e.node_executed async for _, e in bus.replay(run_id, kinds=[Kind.NODE_EXECUTED])]
        finally:
            await bus.close(2)

    return asyncio.run(go())


def test_a_run_whose_sandbox_breaks_for_a_while_completes_with_the_lost_nodes_masked(tmp_path):
    """The interpreter vanishes after the first group ran and comes back once a node was lost: the
    run neither stalls nor penalises the lost nodes; it trains on what ran and finishes."""
    import os
    import sys

    home = tmp_path / "home"
    model = prepare_home(home)
    src = home / "replay"
    src.mkdir()
    (src / "hello.py").write_text("print('hello')\n")
    python = tmp_path / "interp" / "bin" / "python"  # outside the jail's private /tmp mounts
    python.parent.mkdir(parents=True)
    python.symlink_to(os.path.realpath(sys.executable))
    argv = run_argv(
        "treegrpo/examples/run-small.toml",
        sets=(
            f'sampler.model="{model}"',
            f'learner.model="{model}"',
            'sampler.backend="replay"',
            f'sampler.replay.source_dir="{src}"',
            "sampler.replay.delay_s=2",
            "runner.timeout_s=300",
            "executor.max_concurrency=1",
            f'executor.local.python="{python}"',
        ),
    )
    started = time.monotonic()
    proc = subprocess.Popen(
        argv, env=env_for(home), cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    try:
        url = _wait(lambda: (home / "nats" / "url").exists() and run_ids(home), 120) and (
            (home / "nats" / "url").read_text().strip()
        )
        (run_id,) = run_ids(home)
        _wait(lambda: any(x.status == "no_submission" for x in _executed(url, run_id)), 180)
        python.unlink()  # the sandbox cannot start scripts for a while
        _wait(lambda: any(x.status == INFRASTRUCTURE for x in _executed(url, run_id)), 120)
        python.symlink_to(os.path.realpath(sys.executable))
        screen, _ = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
    took = time.monotonic() - started
    assert proc.returncode == 0, screen[-3000:]
    assert took < 240, f"took {took:.0f}s (runner.timeout_s is 300)"
    log = read_log(home, run_id)
    masked = log.graded_status[INFRASTRUCTURE]
    assert masked >= 1 and log.counts[Kind.NODE_GRADED] == log.counts[Kind.NODE_SAMPLED] == 12
    assert len(log.steps) == 2  # both rounds trained, masked nodes and all
    trained = {n for s in log.steps for n in s.sibling_groups}
    assert set(log.groups_scored) == trained  # every group consumed, the dropped ones included
    assert "infra" in screen


def _wait(cond, timeout: float):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = cond()
        if got:
            return got
        time.sleep(0.3)
    raise AssertionError(f"condition not met within {timeout}s")
