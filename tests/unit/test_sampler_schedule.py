"""The sampler's scheduler: slots shared among open runs in turn, a failed group held back for its
retry delay, every task it started cancelled at a stop (no network, no model).

Imports a private module: `treegrpo_sampler._schedule`, `treegrpo_sampler._state` (the scheduler
and the run state it orders are the service's own parts).
"""

from __future__ import annotations

import asyncio

import pytest

from treegrpo.config import RunSpec
from treegrpo_sampler._schedule import Scheduler
from treegrpo_sampler._state import RunState

pytestmark = pytest.mark.timeout(10)


def run(run_id: str, completed: bool = False) -> RunState:
    state = RunState(run_id, RunSpec(run_id=run_id, tasks=["t"]))
    state.completed = completed
    return state


def test_open_runs_take_turns_served_longest_ago_first_with_an_equal_share():
    s = Scheduler(slots=8)
    a, b, done = run("a"), run("b"), run("done", completed=True)
    s.served("a")
    order, share = s.turns([a, b, done])
    assert [r.run_id for r in order] == ["b", "a"] and share == 4
    assert s.turns([])[1] == 8


async def test_a_failed_group_is_held_until_its_retry_delay_passes():
    s = Scheduler(slots=2, retry_s=0.05)
    ended = []
    s.start("g1", asyncio.sleep(0), lambda gid, task: ended.append(gid))
    assert s.held() == {"g1"} and s.free(2) == 1
    await asyncio.sleep(0.01)
    assert ended == ["g1"] and s.held() == set() and s.free(2) == 2
    s.retry_later("g1")
    assert s.held() == {"g1"}
    await asyncio.sleep(0.06)
    assert s.held() == set()


async def test_a_finished_group_wakes_the_pump():
    s = Scheduler(slots=1)
    s.start("g", asyncio.sleep(0), lambda gid, task: None)
    await asyncio.wait_for(s.wait(1.0), 0.5)  # woken by the group's end, well before the timeout


async def test_a_pull_already_pending_is_not_started_twice_and_a_stop_cancels_everything():
    s = Scheduler(slots=2)
    started = []

    async def forever(tag: str) -> None:
        started.append(tag)
        await asyncio.sleep(3600)

    s.pull(("r", 2), lambda: forever("pull"))
    s.pull(("r", 2), lambda: forever("pull again"))
    s.start("g", forever("group"), lambda gid, task: None)
    await asyncio.sleep(0.01)
    assert started == ["pull", "group"] and s.in_flight == 1
    await asyncio.wait_for(s.cancel_all(), 1.0)
    await asyncio.sleep(0)
    assert s.in_flight == 0
    s.pull(("r", 2), lambda: forever("after the stop"))  # the cancelled pull no longer counts
    await asyncio.sleep(0.01)
    assert started[-1] == "after the stop"
    s.cancel()
