"""The grader service against a real nats-server: grading, out-of-order siblings, restarts."""

from __future__ import annotations

import asyncio
import random
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from treegrpo import events
from treegrpo.bus import SUBMISSIONS
from treegrpo.config import NatsSettings, TelemetrySettings
from treegrpo.events import Kind
from treegrpo.tasks import ensure_builtin_tasks, grade_submission
from treegrpo.v1 import events_pb2 as pb
from treegrpo_grader.config import GraderConfig
from treegrpo_grader.rewards import sigmoid
from treegrpo_grader.service import GraderService

pytestmark = pytest.mark.timeout(90)
RUN, TASK, ROUND, STEP, G = "r1", "spooky-mini", 1, 0, 4


@pytest.fixture(scope="module")
def tasks_home(tmp_path_factory) -> Path:
    home = tmp_path_factory.mktemp("grader-home")
    ensure_builtin_tasks(home, tasks=[TASK])
    return home


def submission(home: Path, kind: str) -> bytes:
    """A valid submission of a given quality, or a broken one."""
    answers = pd.read_csv(home / "tasks" / "private" / TASK / "answers.csv")
    cols = ["EAP", "HPL", "MWS"]
    truth = answers[cols].to_numpy(dtype=float)
    mix = {"good": 0.6, "fair": 0.2, "uniform": 0.0}.get(kind, 0.0)
    probs = mix * truth + (1 - mix) / 3
    frame = pd.DataFrame(probs, columns=cols)
    frame.insert(0, "id", answers["id"])
    if kind == "nan":
        frame.loc[3, "EAP"] = np.nan
    return frame.to_csv(index=False).encode()


def executed(i: int, status: str, key: str = "") -> pb.Event:
    body = pb.NodeExecuted(
        node_id=events.node_id(RUN, TASK, ROUND, STEP, i),
        task=TASK,
        round=ROUND,
        step=STEP,
        sibling_group=events.group_id(RUN, TASK, ROUND, STEP),
        group_size=G,
        mode="draft",
        status=status,
        exec_time=1.5 + i,
        submission_key=key,
    )
    if status == "crashed":
        body.exc_type = "ValueError"
    return events.make_event(RUN, "executor/test", body)


async def put_submission(bus, i: int, data: bytes) -> str:
    key = f"{RUN}/{events.node_id(RUN, TASK, ROUND, STEP, i)}/submission.csv"
    await bus.put_object(SUBMISSIONS, key, data)
    return key


def make_service(nats_server, home: Path, **kw) -> GraderService:
    cfg = GraderConfig(
        nats=NatsSettings(url=nats_server.url),
        telemetry=TelemetrySettings(enabled=False),
        tasks_home=str(home),
        prepare_builtins=False,
        **kw,
    )
    return GraderService(cfg, instance="test")


async def start(service: GraderService) -> asyncio.Task:
    await service.setup()
    return asyncio.create_task(service.run())


async def halt(service: GraderService, task: asyncio.Task) -> None:
    await service.stop()
    await asyncio.wait_for(task, 15)
    await service.close()


async def wait_for(bus, kind: str, key: str, timeout: float = 30.0) -> pb.Event:
    deadline = asyncio.get_running_loop().time() + timeout
    while asyncio.get_running_loop().time() < deadline:
        found = await bus.last_event(RUN, kind, key)
        if found is not None:
            return found
        await asyncio.sleep(0.1)
    raise AssertionError(f"no {kind} {key} within {timeout}s")


async def count(bus, kind: str) -> int:
    return len([1 async for _ in bus.replay(RUN, kinds=[kind])])


async def test_group_of_mixed_siblings_in_any_order_is_graded_and_scored_once(bus, nats_server, tasks_home):
    kinds = {0: "good", 1: "fair", 2: "nan", 3: "crashed"}
    published = []
    for i, kind in kinds.items():
        key = "" if kind == "crashed" else await put_submission(bus, i, submission(tasks_home, kind))
        published.append(executed(i, "crashed" if kind == "crashed" else "ok", key))
    random.Random(7).shuffle(published)
    await bus.publish_many(published)
    service = make_service(nats_server, tasks_home)
    runner = await start(service)
    try:
        scored = (
            await wait_for(bus, Kind.GROUP_SCORED, events.group_id(RUN, TASK, ROUND, STEP))
        ).group_scored
    finally:
        await halt(service, runner)
    graded = [
        (await bus.last_event(RUN, Kind.NODE_GRADED, events.node_id(RUN, TASK, ROUND, STEP, i))).node_graded
        for i in range(G)
    ]
    assert [g.status for g in graded] == ["ok", "ok", "invalid_submission", "crashed"]
    task = ensure_builtin_tasks(tasks_home, tasks=[TASK])[TASK]
    direct = grade_submission(task, submission(tasks_home, "good"))
    assert graded[0].test_metric == direct.test_metric and graded[0].oriented == -direct.test_metric
    assert graded[0].source == "grade" and not graded[0].is_buggy and graded[0].exec_time == 1.5
    assert "NaN" in graded[2].grade_error and graded[2].is_buggy and not graded[2].HasField("test_metric")
    assert graded[3].source == "none" and graded[3].is_buggy
    assert [m.node_id for m in scored.members] == [g.node_id for g in graded]
    rewards = [m.reward for m in scored.members]
    mean = (graded[0].oriented + graded[1].oriented) / 2
    assert rewards[0] == pytest.approx(sigmoid((graded[0].oriented - mean) / 0.5))
    assert 0.5 < rewards[0] < 1 and 0 < rewards[1] < 0.5
    assert rewards[2:] == [-0.5, -0.5]
    assert await count(bus, Kind.GROUP_SCORED) == 1 and await count(bus, Kind.NODE_GRADED) == G


async def test_grader_restarted_mid_group_scores_the_group_exactly_once(bus, nats_server, tasks_home):
    keys = [
        await put_submission(bus, i, submission(tasks_home, "good" if i % 2 else "fair")) for i in range(G)
    ]
    first = make_service(nats_server, tasks_home)
    runner = await start(first)
    await bus.publish_many([executed(i, "ok", keys[i]) for i in (2, 0, 3)])
    for i in (2, 0, 3):
        await wait_for(bus, Kind.NODE_GRADED, events.node_id(RUN, TASK, ROUND, STEP, i))
    await halt(first, runner)  # the grader goes away with the group incomplete
    assert await bus.last_event(RUN, Kind.GROUP_SCORED, events.group_id(RUN, TASK, ROUND, STEP)) is None

    second = make_service(nats_server, tasks_home)  # a fresh process: nothing in memory
    runner = await start(second)
    try:
        await bus.publish(executed(1, "ok", keys[1]))
        await bus.publish(executed(3, "ok", keys[3]))  # a duplicate delivery of a graded node is harmless
        scored = (
            await wait_for(bus, Kind.GROUP_SCORED, events.group_id(RUN, TASK, ROUND, STEP))
        ).group_scored
        await asyncio.sleep(0.5)
    finally:
        await halt(second, runner)
    assert second.graded == 1  # only the new sibling was graded; the others came from the log
    assert len(scored.members) == G and all(m.status == "ok" for m in scored.members)
    assert await count(bus, Kind.GROUP_SCORED) == 1


async def test_redelivered_last_sibling_after_crash_before_scoring_still_scores(bus, nats_server, tasks_home):
    """Every node.graded is on the log but group.scored is not (the grader died in between)."""
    keys = [await put_submission(bus, i, submission(tasks_home, "fair")) for i in range(G)]
    first = make_service(nats_server, tasks_home)
    await first.setup()
    for i in range(G):  # graded facts as the dead instance left them
        graded = await first.grade(RUN, executed(i, "ok", keys[i]).node_executed)
        await first.publish(RUN, graded)
    await first.close()
    second = make_service(nats_server, tasks_home)
    runner = await start(second)
    try:
        await bus.publish(executed(G - 1, "ok", keys[G - 1]))
        scored = (
            await wait_for(bus, Kind.GROUP_SCORED, events.group_id(RUN, TASK, ROUND, STEP))
        ).group_scored
    finally:
        await halt(second, runner)
    assert second.graded == 0 and [m.reward for m in scored.members] == [0.5] * G


async def test_an_oversized_submission_is_invalid_without_download_a_lost_one_is_ours(
    bus, nats_server, tasks_home
):
    """Too big is the script's doing (invalid, penalised); a submission the executor stored but the
    store lost, or an `ok` without a stored submission, is ours: masked, reward 0, no penalty."""
    big = await put_submission(bus, 0, b"id,EAP,HPL,MWS\n" + b"x,0.3,0.3,0.4\n" * 2000)
    await bus.publish_many(
        [
            executed(0, "ok", big),
            executed(1, "ok", "r1/nothing/submission.csv"),
            executed(2, "ok", ""),
            executed(3, "timeout"),
        ]
    )
    service = make_service(nats_server, tasks_home, max_submission_bytes=4096, infra={"retry_s": 0.2})
    runner = await start(service)
    try:
        scored = (
            await wait_for(bus, Kind.GROUP_SCORED, events.group_id(RUN, TASK, ROUND, STEP))
        ).group_scored
    finally:
        await halt(service, runner)
    graded = [(await bus.last_event(RUN, Kind.NODE_GRADED, m.node_id)).node_graded for m in scored.members]
    assert [g.status for g in graded] == ["invalid_submission", "infrastructure", "infrastructure", "timeout"]
    assert "over the 4.0 KiB limit" in graded[0].grade_error
    assert "missing" in graded[1].grade_error and "no submission" in graded[2].grade_error
    assert [m.reward for m in scored.members] == [-0.5, 0.0, 0.0, -0.5]


async def test_malformed_executed_fact_is_dead_lettered_and_grading_goes_on(bus, nats_server, tasks_home):
    from treegrpo.bus import DLQ_ROOT, DLQ_STREAM

    broken = executed(0, "crashed")
    broken.node_executed.group_size = 0  # no group to complete: retrying cannot help
    await bus.publish(events.make_event(RUN, "executor/test", broken.node_executed, key="broken"))
    await bus.publish_many([executed(i, "no_code") for i in range(G)])
    service = make_service(nats_server, tasks_home)
    runner = await start(service)
    try:
        scored = (
            await wait_for(bus, Kind.GROUP_SCORED, events.group_id(RUN, TASK, ROUND, STEP))
        ).group_scored
    finally:
        await halt(service, runner)
    assert [m.status for m in scored.members] == ["no_code"] * G
    dead = await bus.js.get_last_msg(DLQ_STREAM, f"{DLQ_ROOT}.grader.{RUN}")
    assert "group_size" in events.decode(dead.data).dead_lettered.reason
