"""Infrastructure faults are not the policy's fault (real nats-server, real executor and grader).

Faults are injected from outside: the sandbox's interpreter disappears (the executor's sandbox
setup fails), a submission object vanishes from the store, a task's private answers go missing.
Before issue 25 such a node was dead-lettered after ten deliveries, its group never completed and
the run waited out `runner.timeout_s`; a lost submission object was graded `invalid_submission`,
a -0.5 the policy did not earn. Now the node is retried, then recorded with status
`infrastructure`, masked out of its group (reward 0, no advantage), and a service that can do
nothing at all stops with the reason.
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

import pandas as pd
import pytest

from treegrpo import advantages, events
from treegrpo.bus import SUBMISSIONS
from treegrpo.config import RunSpec, load
from treegrpo.events import INFRASTRUCTURE, Kind
from treegrpo.tasks import ensure_builtin_tasks
from treegrpo.v1 import events_pb2 as pb
from treegrpo_executor.config import ExecutorConfig
from treegrpo_executor.service import ExecutorService
from treegrpo_grader.config import GraderConfig
from treegrpo_grader.service import GraderService

pytestmark = pytest.mark.timeout(120)
RUN, TASK = "r1", "spooky-mini"
FAST = {"attempts": 3, "retry_s": 0.2}


@pytest.fixture(scope="module")
def tasks_home(tmp_path_factory) -> Path:
    home = tmp_path_factory.mktemp("infra-home")
    ensure_builtin_tasks(home, tasks=[TASK])
    return home


def uniform_code() -> str:
    """A script that writes a valid (uniform) spooky submission from the public test file."""
    return (
        "import csv\nrows = list(csv.DictReader(open('input/test.csv')))\n"
        "with open('submission/submission.csv', 'w') as f:\n"
        "    f.write('id,EAP,HPL,MWS\\n')\n"
        "    for r in rows:\n"
        "        f.write(f\"{r['id']},0.3333333333,0.3333333333,0.3333333334\\n\")\n"
    )


def interpreter(tmp: Path) -> Path:
    """The sandbox's interpreter as a link the test can take away (outside the jail's private /tmp
    mounts: `<tmp>/interp/bin/python`, whose tree the jail exposes)."""
    link = tmp / "interp" / "bin" / "python"
    link.parent.mkdir(parents=True)
    link.symlink_to(os.path.realpath(sys.executable))
    return link


def run_started(group_size: int) -> pb.Event:
    spec = RunSpec(run_id=RUN, tasks=[TASK], rounds=1, resource_gate=False)
    spec.tree.group_size = group_size
    body = pb.RunStarted(run_spec_json=spec.model_dump_json(), tasks=[TASK], rounds=1)
    return events.make_event(RUN, "test/cli", body)


def sampled(step: int, i: int, code: str, size: int) -> pb.Event:
    body = pb.NodeSampled(
        node_id=events.node_id(RUN, TASK, 1, step, i),
        task=TASK,
        round=1,
        step=step,
        sibling_group=events.group_id(RUN, TASK, 1, step),
        mode="draft",
        group_size=size,
        index_in_group=i,
        code=code,
    )
    return events.make_event(RUN, "test/sampler", body)


def executed(step: int, i: int, status: str, size: int, key: str = "") -> pb.Event:
    body = pb.NodeExecuted(
        node_id=events.node_id(RUN, TASK, 1, step, i),
        task=TASK,
        round=1,
        step=step,
        sibling_group=events.group_id(RUN, TASK, 1, step),
        group_size=size,
        mode="draft",
        status=status,
        submission_key=key,
    )
    return events.make_event(RUN, "executor/test", body)


def executor(url: str, tmp: Path, home: Path, python: Path, **over) -> ExecutorService:
    cfg = {
        "nats": {"url": url, "drain_timeout_s": 1.0},
        "telemetry": {"enabled": False},
        "health": {"enabled": False},
        "timeout_s": 30,
        "max_concurrency": 1,
        "public_data_roots": [str(home / "tasks" / "public")],
        "local": {"workspace_root": str(tmp / "ws"), "hidden_paths": [], "python": str(python)},
        "caps": {"cpu": 1, "mem_gib": 2},
        "infra": FAST,
        **over,
    }
    return ExecutorService(load(ExecutorConfig, None, cfg), instance="test")


def grader(url: str, home: Path, **over) -> GraderService:
    cfg = {
        "nats": {"url": url, "drain_timeout_s": 1.0},
        "telemetry": {"enabled": False},
        "health": {"enabled": False},
        "tasks_home": str(home),
        "prepare_builtins": False,
        "unknown_task_retry_s": 0.2,
        "infra": FAST,
        **over,
    }
    return GraderService(load(GraderConfig, None, cfg), instance="test")


async def start(service) -> asyncio.Task:
    await service.setup()
    return asyncio.create_task(service.run())


async def halt(*pairs) -> None:
    for service, task in pairs:
        await service.stop()
        await asyncio.wait_for(task, 30)
        await service.close()


async def wait_for(bus, kind: str, key: str, timeout: float = 40.0) -> pb.Event:
    deadline = asyncio.get_running_loop().time() + timeout
    while asyncio.get_running_loop().time() < deadline:
        found = await bus.last_event(RUN, kind, key)
        if found is not None:
            return found
        await asyncio.sleep(0.1)
    raise AssertionError(f"no {kind} {key} within {timeout}s")


async def test_a_node_the_sandbox_cannot_run_is_masked_and_its_group_trains_on_the_rest(
    bus, nats_server, tmp_path, tasks_home
):
    python = interpreter(tmp_path)
    await bus.publish(run_started(3))
    ex, gr = executor(nats_server.url, tmp_path, tasks_home, python), grader(nats_server.url, tasks_home)
    running = [(ex, await start(ex)), (gr, await start(gr))]
    try:
        nodes = [events.node_id(RUN, TASK, 1, 0, i) for i in range(3)]
        await bus.publish_many(
            [sampled(0, 0, uniform_code(), 3), sampled(0, 1, "raise ValueError('no')\n", 3)]
        )
        for nid in nodes[:2]:
            await wait_for(bus, Kind.NODE_GRADED, nid)
        python.unlink()  # the sandbox can no longer start a script: the executor's fault
        await bus.publish(sampled(0, 2, uniform_code(), 3))
        lost = (await wait_for(bus, Kind.NODE_EXECUTED, nodes[2], timeout=30)).node_executed
        scored = (await wait_for(bus, Kind.GROUP_SCORED, events.group_id(RUN, TASK, 1, 0))).group_scored
        graded = (await bus.last_event(RUN, Kind.NODE_GRADED, nodes[2])).node_graded
    finally:
        await halt(*running)
    assert lost.status == INFRASTRUCTURE and lost.exc_type == "SandboxError"
    assert "after 3 attempt(s)" in lost.term_tail and "exec" in lost.term_tail
    assert graded.status == INFRASTRUCTURE and not graded.is_buggy and "SandboxError" in graded.grade_error
    statuses = [m.status for m in scored.members]
    rewards = [m.reward for m in scored.members]
    assert statuses == ["ok", "crashed", INFRASTRUCTURE]
    assert rewards == [0.5, -0.5, 0.0]  # no penalty for the masked node; the lone valid one: σ(0)
    adv = advantages.compute("grpo", rewards, statuses)
    assert adv[2] == 0.0 and adv == advantages.compute("grpo", rewards[:2], statuses[:2]) + [0.0]
    assert advantages.dropped_reason(statuses) == ""
    assert ex.failure == ""  # one lost node is bad luck, not "cannot run anything"


async def test_grading_that_fails_on_our_side_masks_the_node_instead_of_a_penalty(
    bus, nats_server, tmp_path, tasks_home
):
    answers = tasks_home / "tasks" / "private" / TASK / "answers.csv"
    ids = pd.read_csv(answers)["id"]
    body = "id,EAP,HPL,MWS\n" + "".join(f"{i},0.2,0.3,0.5\n" for i in ids)
    key = f"{RUN}/{events.node_id(RUN, TASK, 1, 0, 0)}/submission.csv"
    await bus.put_object(SUBMISSIONS, key, body.encode())
    # the executor stored it; the store lost it
    lost = f"{RUN}/{events.node_id(RUN, TASK, 1, 0, 1)}/submission.csv"
    await bus.publish_many(
        [executed(0, 0, "ok", 3, key), executed(0, 1, "ok", 3, lost), executed(0, 2, "crashed", 3)]
    )
    gr = grader(nats_server.url, tasks_home, infra={**FAST, "fail_after": 0})
    running = [(gr, await start(gr))]
    try:
        first = (await wait_for(bus, Kind.GROUP_SCORED, events.group_id(RUN, TASK, 1, 0))).group_scored
        answers.rename(answers.with_suffix(".gone"))  # the grader's own data is gone now
        await bus.publish_many([executed(1, 0, "ok", 2, key), executed(1, 1, "timeout", 2)])
        second = (await wait_for(bus, Kind.GROUP_SCORED, events.group_id(RUN, TASK, 1, 1))).group_scored
    finally:
        answers.with_suffix(".gone").rename(answers)
        await halt(*running)
    assert [m.status for m in first.members] == ["ok", INFRASTRUCTURE, "crashed"]
    assert [m.reward for m in first.members] == [0.5, 0.0, -0.5]
    why = (await bus.last_event(RUN, Kind.NODE_GRADED, events.node_id(RUN, TASK, 1, 0, 1))).node_graded
    assert "missing from tg-submissions" in why.grade_error and "after 3 attempt(s)" in why.grade_error
    # answers unreadable: the valid-looking node is masked, leaving one sibling: the group is dropped
    assert [m.status for m in second.members] == [INFRASTRUCTURE, "timeout"]
    assert [m.reward for m in second.members] == [0.0, -0.5]
    assert "fewer than the 2 a group needs" in advantages.dropped_reason([m.status for m in second.members])


async def test_an_executor_that_cannot_run_anything_stops_itself_within_seconds(
    bus, nats_server, tmp_path, tasks_home
):
    await bus.publish(run_started(4))
    ex = executor(nats_server.url, tmp_path, tasks_home, tmp_path / "gone" / "bin" / "python")
    task = await start(ex)
    began = asyncio.get_running_loop().time()
    try:
        await bus.publish_many([sampled(0, i, "print(1)\n", 4) for i in range(4)])
        while not ex.failure and asyncio.get_running_loop().time() - began < 30:
            await asyncio.sleep(0.1)
        took = asyncio.get_running_loop().time() - began
    finally:
        await halt((ex, task))
    assert "the executor cannot run scripts: 3 nodes in a row failed on our side" in ex.failure
    assert "SandboxError" in ex.failure and "sandbox setup failed" in ex.failure
    assert took < 15, f"took {took:.1f}s"
    recorded = [
        await bus.last_event(RUN, Kind.NODE_EXECUTED, events.node_id(RUN, TASK, 1, 0, i)) for i in range(3)
    ]
    assert all(r is not None and r.node_executed.status == INFRASTRUCTURE for r in recorded)


async def test_a_grader_that_cannot_grade_anything_stops_itself(bus, nats_server, tmp_path, tasks_home):
    answers = tasks_home / "tasks" / "private" / TASK / "answers.csv"
    key = f"{RUN}/x/submission.csv"
    await bus.put_object(SUBMISSIONS, key, b"id,EAP,HPL,MWS\n")
    answers.rename(answers.with_suffix(".gone"))
    gr = grader(nats_server.url, tasks_home, infra={**FAST, "fail_after": 2})
    task = await start(gr)
    try:
        await bus.publish_many([executed(0, i, "ok", 2, key) for i in range(2)])
        began = asyncio.get_running_loop().time()
        while not gr.failure and asyncio.get_running_loop().time() - began < 30:
            await asyncio.sleep(0.1)
    finally:
        answers.with_suffix(".gone").rename(answers)
        await halt((gr, task))
    assert "the grader cannot grade submissions: 2 nodes in a row" in gr.failure
    assert "answers of task spooky-mini unreadable" in gr.failure
