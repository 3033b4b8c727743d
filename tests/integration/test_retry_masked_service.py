"""Masked nodes run again on resume (`treegrpo run --resume --retry-masked`), with a real nats-server,
executor and grader, and the runner's own retry step (issue 32, item 5).

The fault is injected from outside, as in test_infrastructure_faults.py: the sandbox's interpreter
disappears, so the executor masks the nodes it cannot start (`infrastructure`). The services stop
(the run ended), the interpreter comes back, the runner records its retries and fresh services run
them. Before `--retry-masked` a masked node stayed masked on every resume: its group was scored
without it even when nothing of it had been scored yet.

Imports a private module: `treegrpo.runner._retry` (the runner's retry step, as `_execute` calls it).
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

import pytest

from tests.integration.test_infrastructure_faults import (
    FAST,
    TASK,
    executor,
    grader,
    halt,
    interpreter,
    run_started,
    sampled,
    start,
    uniform_code,
    wait_for,
)
from treegrpo import events
from treegrpo.archive import collect_facts
from treegrpo.bus import SUBMISSIONS
from treegrpo.events import INFRASTRUCTURE, Kind
from treegrpo.runner._retry import retry_masked
from treegrpo.tasks import ensure_builtin_tasks

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]
RUN = "r1"
NO_STREAK = {**FAST, "fail_after": 0}  # masked nodes in a row do not stop the executor here


@pytest.fixture(scope="module")
def tasks_home(tmp_path_factory) -> Path:
    home = tmp_path_factory.mktemp("retry-home")
    ensure_builtin_tasks(home, tasks=[TASK])
    return home


def nid(step: int, i: int) -> str:
    return events.node_id(RUN, TASK, 1, step, i)


def gid(step: int) -> str:
    return events.group_id(RUN, TASK, 1, step)


async def messages(bus, pattern: str) -> dict[str, int]:
    """Messages per subject under `pattern`: what was published, duplicates included."""
    return await bus._subjects(pattern)


async def test_masked_nodes_of_open_groups_run_again_once_and_their_group_is_scored_once(
    bus, nats_server, tmp_path, tasks_home
):
    python = interpreter(tmp_path)
    await bus.publish(run_started(2))
    ex = executor(nats_server.url, tmp_path, tasks_home, python, infra=NO_STREAK)
    gr = grader(nats_server.url, tasks_home)
    running = [(ex, await start(ex)), (gr, await start(gr))]
    try:
        # group 0 runs while the sandbox works: scored, never touched again
        await bus.publish_many(
            [sampled(0, 0, uniform_code(), 2), sampled(0, 1, "raise ValueError('no')\n", 2)]
        )
        first = (await wait_for(bus, Kind.GROUP_SCORED, gid(0))).group_scored
        os.unlink(python)  # the executor's host breaks
        # group 1: one node masked, its sibling never ran (the run stopped); group 2: both masked, scored
        await bus.publish_many([sampled(1, 0, uniform_code(), 2), sampled(2, 0, uniform_code(), 2)])
        await bus.publish(sampled(2, 1, uniform_code(), 2))
        for step, i in ((1, 0), (2, 0), (2, 1)):
            assert (await wait_for(bus, Kind.NODE_GRADED, nid(step, i))).node_graded.status == INFRASTRUCTURE
        lost = (await wait_for(bus, Kind.GROUP_SCORED, gid(2))).group_scored
    finally:
        await halt(*running)
    assert [m.status for m in lost.members] == [INFRASTRUCTURE, INFRASTRUCTURE]
    assert await bus.last_event(RUN, Kind.GROUP_SCORED, gid(1)) is None

    python.symlink_to(os.path.realpath(sys.executable))  # the host is fixed
    await bus.publish(sampled(1, 1, uniform_code(), 2))  # the sibling the stopped run never executed
    plan = await retry_masked(bus, RUN, run_attempt=2)
    assert [(r.node_id, r.attempt) for r in plan.retry] == [(nid(1, 0), 2)]
    assert sorted(plan.kept) == sorted([nid(2, 0), nid(2, 1)]) and plan.pending == []
    again = await retry_masked(bus, RUN, run_attempt=2)  # a runner re-planning from the same log
    assert [r.node_id for r in again.retry] == [] and again.pending == [nid(1, 0)]

    ex = executor(nats_server.url, tmp_path / "again", tasks_home, python, infra=NO_STREAK)
    running = [(ex, await start(ex))]
    try:  # both executions recorded before any grading: the sibling's comes first on the stream
        retry = (await wait_for(bus, Kind.NODE_EXECUTED, (nid(1, 0), "2"))).node_executed
        await wait_for(bus, Kind.NODE_EXECUTED, nid(1, 1))
        gr = grader(nats_server.url, tasks_home)
        running.append((gr, await start(gr)))
        scored = (await wait_for(bus, Kind.GROUP_SCORED, gid(1))).group_scored
        regraded = (await wait_for(bus, Kind.NODE_GRADED, (nid(1, 0), "2"))).node_graded
        await asyncio.sleep(1.0)  # room for a second scoring, if there were one
    finally:
        await halt(*running)

    assert (
        retry.status == "ok"
        and retry.attempt == 2
        and retry.submission_key == f"{RUN}/{nid(1, 0)}/a2/submission.csv"
    )
    assert await bus.object_size(SUBMISSIONS, retry.submission_key)
    assert regraded.status == "ok" and regraded.attempt == 2 and regraded.source == "grade"
    assert [(m.node_id, m.status) for m in scored.members] == [(nid(1, 0), "ok"), (nid(1, 1), "ok")]
    # the masked attempt stays on the log as history
    old = (await bus.last_event(RUN, Kind.NODE_GRADED, nid(1, 0))).node_graded
    assert old.status == INFRASTRUCTURE and old.attempt == 0
    # every fact once: one message per subject, one retry, each group scored once
    per_subject = await messages(bus, f"tg.{RUN}.>")
    assert all(n == 1 for n in per_subject.values()), {s: n for s, n in per_subject.items() if n != 1}
    kinds = [s.split(".")[2] + "." + s.split(".")[3] for s in per_subject]
    assert kinds.count("node.retried") == 1 and kinds.count("group.scored") == 3
    assert kinds.count("node.executed") == kinds.count("node.graded") == 7  # 6 nodes + 1 retry
    assert (await bus.last_event(RUN, Kind.GROUP_SCORED, gid(0))).group_scored == first
    assert (await bus.last_event(RUN, Kind.GROUP_SCORED, gid(2))).group_scored == lost

    facts = await collect_facts(bus, RUN)  # what the export and the report read
    assert facts.graded[nid(1, 0)].status == "ok" and facts.executed[nid(1, 0)].attempt == 2
    assert sorted(facts.infrastructure) == sorted([nid(2, 0), nid(2, 1)])
    assert facts.retried == {nid(1, 0): 2}
    assert facts.rewards[nid(1, 0)] == scored.members[0].reward
    assert (await retry_masked(bus, RUN, run_attempt=3)).retry == []  # nothing left to retry
