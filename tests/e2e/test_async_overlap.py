"""Async mode overlaps rollout and training; sync mode pays their sum.

Durations are made controllable by config: the replay backend's per-group delay (generation), a
script that sleeps (execution), and the learner's `step.min_seconds` (training). Both modes run the
same real process tree; the round period is measured from the log's own timestamps.
"""

from __future__ import annotations

import asyncio
import statistics

import pytest

from tests.e2e._harness import prepare_home, run_ids, start_run
from treegrpo import events
from treegrpo.bus import Bus
from treegrpo.embedded import EmbeddedNats
from treegrpo.events import Kind

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]
SCRIPT = "import time\ntime.sleep(4)\nprint('slept')\n"


def measure(home, run_id, staleness: int):
    async def fold():
        starts, ends, steps = {}, {}, []
        bus = await Bus.connect(server.url, "test/overlap", 10)
        async for _, e in bus.replay(
            run_id, [Kind.ROUND_STARTED, Kind.ROUND_COMPLETED, Kind.LEARNER_STEPPED]
        ):
            b = events.body_of(e)
            kind = events.kind_of(e)
            if kind == Kind.ROUND_STARTED:
                starts[b.round] = e.envelope.time
            elif kind == Kind.ROUND_COMPLETED:
                ends[b.round] = e.envelope.time
            else:  # training time proper: the step's total less the wait for its batch (`gen`)
                steps.append(b.total_s - b.phases_s.gen)
        await bus.close(2)
        return starts, ends, steps

    server = EmbeddedNats(home / "nats" / "data").start()
    try:
        starts, ends, steps = asyncio.run(fold())
    finally:
        server.stop()
    rounds = sorted(starts)
    # steady state: the first staleness+1 rounds need no trained version and start at once
    period = statistics.median(starts[r + 1] - starts[r] for r in rounds[staleness + 1 : -1])
    rollout = statistics.median(ends[r] - starts[r] for r in rounds)
    return period, rollout, statistics.median(steps)


def run_mode(tmp_path, staleness: int):
    home = tmp_path / f"home{staleness}"
    model = prepare_home(home)
    src = home / "replay"
    src.mkdir()
    (src / "sleeper.py").write_text(SCRIPT)
    proc = start_run(
        home,
        "treegrpo/examples/run-small.toml",
        f'sampler.model="{model}"',
        f'learner.model="{model}"',
        'sampler.backend="replay"',
        f'sampler.replay.source_dir="{src}"',
        "sampler.replay.delay_s=2.5",
        "run.rounds=5",
        "run.tree.expansions=2",
        "run.tree.group_size=2",
        f"run.max_staleness={staleness}",
        "executor.max_concurrency=4",
        "learner.step.min_seconds=10",
    )
    assert proc.wait(600) == 0, (home / "run.log").read_text()[-4000:]
    return measure(home, run_ids(home)[0], staleness)


def test_async_round_period_is_the_max_of_rollout_and_training_while_sync_pays_the_sum(tmp_path):
    sync_period, sync_rollout, sync_train = run_mode(tmp_path, 0)
    async_period, async_rollout, async_train = run_mode(tmp_path, 1)
    print(
        f"sync: period {sync_period:.1f}s (rollout {sync_rollout:.1f}s + train {sync_train:.1f}s); "
        f"async: period {async_period:.1f}s (rollout {async_rollout:.1f}s, train {async_train:.1f}s)"
    )
    assert sync_period >= 0.9 * (sync_rollout + sync_train)
    assert async_period <= 1.15 * max(async_rollout, async_train)
