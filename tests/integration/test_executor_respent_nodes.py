"""A re-spent group's nodes (steps past the tree's expansions, `treegrpo.respend.respend_step`) are
nodes of a run that re-spends: the executor runs them, and refuses a step past those."""

from __future__ import annotations

import pytest

from tests.integration.test_executor_service import (
    OK_CODE,
    public_task,
    start_service,
    stop_service,
    wait_executed,
)
from treegrpo import events
from treegrpo.config import RunSpec
from treegrpo.respend import respend_step
from treegrpo.v1 import events_pb2 as pb
from treegrpo_executor.service import outside

pytestmark = pytest.mark.timeout(90)
RUN = "r1"


def spec(respend: bool) -> RunSpec:
    tree = {"expansions": 2, "group_size": 2, "respend": {"enabled": respend}}
    return RunSpec(run_id=RUN, tasks=["t"], rounds=1, resource_gate=False, tree=tree)


def sampled(step: int, i: int = 0) -> pb.NodeSampled:
    return pb.NodeSampled(
        node_id=events.node_id(RUN, "t", 1, step, i),
        task="t",
        round=1,
        step=step,
        sibling_group=events.group_id(RUN, "t", 1, step),
        mode="draft",
        group_size=2,
        index_in_group=i,
        code=OK_CODE,
    )


def test_a_run_that_re_spends_holds_twice_its_expansions_a_round_and_one_that_does_not_only_them():
    on, off = spec(True), spec(False)
    last = respend_step(2, 1)  # the re-spent group of expansion 1: step 3
    assert outside(on, sampled(last)) == "" and outside(on, sampled(2)) == ""
    assert "step 4" in outside(on, sampled(last + 1))
    assert outside(off, sampled(1)) == "" and "step 2" in outside(off, sampled(2))


async def test_the_executor_runs_a_re_spent_groups_node(bus, nats_server, tmp_path):
    public_task(tmp_path)
    s = spec(True)
    started = pb.RunStarted(run_spec_json=s.model_dump_json(), tasks=["t"], rounds=1, resource_gate=False)
    await bus.publish(events.make_event(RUN, "test/cli", started))
    node = sampled(respend_step(2, 0))
    svc, task = await start_service(tmp_path, nats_server.url)
    try:
        await bus.publish(events.make_event(RUN, "test/sampler", node))
        got = await wait_executed(bus, node.node_id, timeout=60)
    finally:
        await stop_service(svc, task)
    assert got.status == "ok" and got.step == 2 and got.sibling_group == node.sibling_group
