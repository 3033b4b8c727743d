"""The runner's wait for the last learner step counts from the end of rollout (a private module:
`treegrpo.runner._loop.finish_step` is what decides when a run is finished).
"""

from __future__ import annotations

import asyncio
import time
from types import SimpleNamespace

import pytest

from treegrpo.runner import Progress
from treegrpo.runner._loop import finish_step

pytestmark = pytest.mark.timeout(10)


def _rollout_done(progress: Progress) -> None:
    for tp in progress.per_task.values():
        tp.rounds_done = progress.rounds


def _file(idle_s: float):
    return SimpleNamespace(runner=SimpleNamespace(learner_idle_s=idle_s))


def test_a_slow_last_step_is_waited_for_from_the_end_of_rollout():
    # step 1 long ago, the last round just scored: the learner is about to step, not idle
    progress = Progress(tasks=["t"], rounds=2, train=True, started=time.time() - 1000)
    progress.learner_steps, progress.last_step_at = 1, time.time() - 500
    _rollout_done(progress)
    assert asyncio.run(finish_step(progress, _file(120))) is False
    progress.rollout_done_at -= 121  # the learner then stayed quiet past the idle wait
    assert asyncio.run(finish_step(progress, _file(120))) is True


def test_the_run_finishes_as_soon_as_every_round_is_trained():
    progress = Progress(tasks=["t"], rounds=2, train=True)
    _rollout_done(progress)
    progress.learner_steps = 2
    assert asyncio.run(finish_step(progress, _file(120))) is True


def test_the_run_is_not_finished_while_rounds_are_still_sampled():
    progress = Progress(tasks=["t"], rounds=2, train=True, started=time.time() - 1000)
    assert asyncio.run(finish_step(progress, _file(1))) is False
