"""The grader on the load task against a real nats-server: every executed node, whatever its
script did, is `ok` with a score from its completion's bytes, and the group carries variance."""

from __future__ import annotations

import asyncio

import pytest

from treegrpo import events
from treegrpo.advantages import compute
from treegrpo.config import NatsSettings, TelemetrySettings
from treegrpo.events import Kind
from treegrpo.tasks import completion_score
from treegrpo.v1 import events_pb2 as pb
from treegrpo_grader.config import GraderConfig
from treegrpo_grader.service import GraderService

pytestmark = pytest.mark.timeout(60)
RUN, TASK, ROUND, STEP, G = "load1", "load-bytes", 1, 0, 16
STATUSES = ("no_code", "crashed", "ok", "timeout", "no_submission", "infrastructure")


def _place(i: int) -> dict:
    return dict(
        node_id=events.node_id(RUN, TASK, ROUND, STEP, i),
        task=TASK,
        round=ROUND,
        step=STEP,
        sibling_group=events.group_id(RUN, TASK, ROUND, STEP),
        group_size=G,
        mode="draft",
    )


def completion(i: int) -> str:
    return f"<think>random weights {i}</think> ??{i * 7919}"  # no code block: the executor says no_code


def sampled(i: int) -> pb.Event:
    body = pb.NodeSampled(**_place(i), index_in_group=i, raw_completion=completion(i))
    return events.make_event(RUN, "sampler/test", body)


def executed(i: int) -> pb.Event:
    body = pb.NodeExecuted(**_place(i), status=STATUSES[i % len(STATUSES)], exec_time=0.1)
    return events.make_event(RUN, "executor/test", body)


async def test_load_nodes_are_scored_from_their_completion_bytes_and_the_group_has_signal(
    bus, nats_server, tmp_path
):
    await bus.publish_many([sampled(i) for i in range(G)] + [executed(i) for i in range(G)])
    cfg = GraderConfig(
        nats=NatsSettings(url=nats_server.url),
        telemetry=TelemetrySettings(enabled=False),
        tasks_home=str(tmp_path),
        prepare_builtins=False,
    )
    service = GraderService(cfg, instance="test")
    await service.setup()
    runner = asyncio.create_task(service.run())
    try:
        key, scored = events.group_id(RUN, TASK, ROUND, STEP), None
        for _ in range(300):
            if (scored := await bus.last_event(RUN, Kind.GROUP_SCORED, key)) is not None:
                break
            await asyncio.sleep(0.1)
        assert scored is not None, "no group.scored within 30 s"
    finally:
        await service.stop()
        await asyncio.wait_for(runner, 15)
        await service.close()
    graded = [
        (await bus.last_event(RUN, Kind.NODE_GRADED, events.node_id(RUN, TASK, ROUND, STEP, i))).node_graded
        for i in range(G)
    ]
    for i, g in enumerate(graded):
        if STATUSES[i % len(STATUSES)] == "infrastructure":  # the executor's fault stays masked
            assert g.status == "infrastructure" and not g.HasField("oriented")
            continue
        assert g.status == "ok" and g.source == "load" and not g.is_buggy
        assert g.test_metric == g.oriented == completion_score(completion(i))
    members = scored.group_scored.members
    adv = compute("grpo_valid_only", [m.reward for m in members], [m.status for m in members])
    assert sum(a != 0.0 for a in adv) == sum(m.status == "ok" for m in members) == G - 2
