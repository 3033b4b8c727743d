"""Re-spending against a real nats-server: the real sampler (tiny local model) and the real grader,
with the test playing the executor (every script crashes), and the learner's wait for a decision.

An all-crashed round is the seed's problem in miniature: no group carries a signal, so the sampler
spends the round's token budget on new siblings of its first group and no more; killed right after
its first decision, a second sampler finishes the new group and decides nothing twice.

Imports a private module: `treegrpo_learner._respend` (what these tests exercise is not on the package's
public surface).
"""

from __future__ import annotations

import asyncio
import contextlib

import pytest

from tests.bus_wait import wait_for_fact
from treegrpo import events
from treegrpo.bus import STREAM, Consumer, Deferred
from treegrpo.config import NatsSettings, RunSpec, TelemetrySettings
from treegrpo.events import Kind
from treegrpo.v1 import events_pb2 as pb
from treegrpo_grader.config import GraderConfig
from treegrpo_grader.service import GraderService
from treegrpo_learner._respend import arrival
from treegrpo_sampler import SamplerConfig
from treegrpo_sampler.service import SamplerService

pytestmark = pytest.mark.timeout(90)
TASK, TOKENS = "spooky-mini", 12  # the sampler's max_new_tokens: what one new sibling reserves


async def started(svc):
    await svc.setup()
    return svc, asyncio.create_task(svc.run())


async def kill(svc, task) -> None:
    """No drain, no acks, generation abandoned (as in test_sampler_service)."""
    svc.stopping.set()
    task.cancel()
    svc.abandon()
    await svc.receiver.stop(0)
    await svc.bus.nc.close()


async def stop(svc, task) -> None:
    await svc.stop()
    await asyncio.wait_for(task, 15)
    await svc.close()


@contextlib.asynccontextmanager
async def crashing_executor(bus):
    """The executor's part: every node's script crashed."""

    async def on(event, delivery):
        n = event.node_sampled
        body = pb.NodeExecuted(
            node_id=n.node_id,
            task=n.task,
            round=n.round,
            step=n.step,
            sibling_group=n.sibling_group,
            group_size=n.group_size,
            mode=n.mode,
            status="crashed",
            exc_type="ZeroDivisionError",
            exec_time=0.5,
            term_tail="ZeroDivisionError: boom",
        )
        if n.HasField("parent_id"):
            body.parent_id = n.parent_id
        await bus.publish(events.make_event(event.envelope.run_id, "executor/test", body))

    stop_ev = asyncio.Event()
    task = asyncio.create_task(
        Consumer(bus, "test-executor", [events.subject_filter(Kind.NODE_SAMPLED)], on).run(stop_ev)
    )
    try:
        yield
    finally:
        stop_ev.set()
        await task


async def wait_for(bus, run, kind, key=None, timeout=60.0) -> pb.Event:
    return await wait_for_fact(bus, run, kind, key, timeout, poll_s=0.1)


async def subject_counts(bus, run: str, kind: Kind) -> dict[str, int]:
    info = await bus.js.stream_info(STREAM, subjects_filter=f"tg.{run}.{kind}.>")
    return {s.rsplit(".", 1)[1]: c for s, c in (info.state.subjects or {}).items()}


@pytest.mark.slow
async def test_an_all_crashed_round_re_spends_its_budget_once_even_across_a_killed_sampler(
    bus, nats_server, tiny, public, tmp_path
):
    run = "rs1"
    cfg = SamplerConfig(
        model=str(tiny),
        nats={"url": nats_server.url},
        workdir=str(tmp_path / "sampler"),
        prompts={"task_roots": [str(public)]},
        sampling={"max_new_tokens": TOKENS},
        grpc={"port": 0},
    )
    grader = GraderService(
        GraderConfig(
            nats=NatsSettings(url=nats_server.url),
            telemetry=TelemetrySettings(enabled=False),
            tasks_home=str(tmp_path / "home"),
            prepare_builtins=False,
        ),
        "g1",
    )
    respend = {"enabled": True, "max_extra_siblings": 3, "round_token_budget": 3 * TOKENS + 5}
    spec = RunSpec(
        run_id=run,
        tasks=[TASK],
        rounds=1,
        train=False,
        tree={"expansions": 2, "group_size": 3, "drafts": 1, "respend": respend},
    )
    g_svc, g_task = await started(grader)
    try:
        async with crashing_executor(bus):
            svc, task = await started(SamplerService(cfg, "s1"))
            body = pb.RunStarted(
                run_spec_json=spec.model_dump_json(), tasks=spec.tasks, rounds=1, train=False
            )
            await bus.publish(events.make_event(run, "cli/test", body))
            await wait_for(bus, run, Kind.GROUP_RESPENT, events.group_id(run, TASK, 1, 0))
            await kill(svc, task)  # right after the first decision: its new group is under way
            svc2, task2 = await started(SamplerService(cfg, "s2"))
            try:
                await wait_for(bus, run, Kind.RUN_COMPLETED)
            finally:
                await stop(svc2, task2)
    finally:
        await stop(g_svc, g_task)
    decided = [e.group_respent async for _, e in bus.replay(run, kinds=[Kind.GROUP_RESPENT])]
    assert [(d.step, d.why, d.extra_siblings) for d in decided] == [
        (0, "all_failed", 3),
        (1, "all_failed", 0),
    ]
    assert set((await subject_counts(bus, run, Kind.GROUP_RESPENT)).values()) == {1}
    grown = decided[0]
    assert (grown.respend_step, grown.reserved_tokens, grown.budget_left, grown.child_mode) == (
        2,
        36,
        5,
        "draft",
    )
    sampled = [e.node_sampled async for _, e in bus.replay(run, kinds=[Kind.NODE_SAMPLED])]
    new = [n for n in sampled if n.step == 2]
    assert sorted(n.index_in_group for n in new) == [0, 1, 2] and {n.group_size for n in new} == {3}
    assert {n.sibling_group for n in new} == {grown.respend_group}
    payloads = [e.tokens_recorded async for _, e in bus.replay(run, kinds=[Kind.TOKENS_RECORDED])]
    spent = [len(t.response_token_ids) for t in payloads if t.step == 2]
    assert len(spent) == 3 and 0 < sum(spent) <= respend["round_token_budget"]  # never exceeded
    counts = await subject_counts(bus, run, Kind.NODE_SAMPLED)
    assert len(counts) == 2 * 3 + 3 and set(counts.values()) == {1}  # every node once, none twice
    scored = await bus.last_event(run, Kind.GROUP_SCORED, grown.respend_group)
    assert len(scored.group_scored.members) == 3  # the grader scored the new group as any other
    assert await bus.last_event(run, Kind.ROUND_COMPLETED, (TASK, "1")) is not None


async def test_the_learner_waits_for_the_decision_on_a_zero_variance_group(bus):
    run = "rs2"
    spec = RunSpec(run_id=run, tasks=[TASK], tree={"expansions": 2, "respend": {"enabled": True}})
    gid = events.group_id(run, TASK, 1, 0)
    flat = pb.GroupScored(sibling_group=gid, task=TASK, round=1, step=0)
    flat.members.add(node_id="a", reward=-0.5, status="crashed")
    flat.members.add(node_id="b", reward=-0.5, status="timeout")
    with pytest.raises(Deferred):
        await arrival(bus, run, spec, flat)
    decision = pb.GroupRespent(
        sibling_group=gid, task=TASK, round=1, step=0, extra_siblings=4, respend_step=2
    )
    await bus.publish(events.make_event(run, "sampler/test", decision))
    got = await arrival(bus, run, spec, flat)
    assert (got.extra, got.expects) == (False, 1)
    mixed = pb.GroupScored(sibling_group=events.group_id(run, TASK, 1, 1), task=TASK, round=1, step=1)
    mixed.members.add(node_id="c", reward=0.4, status="ok")
    mixed.members.add(node_id="d", reward=-0.5, status="crashed")
    assert (await arrival(bus, run, spec, mixed)).expects == 0  # has variance: no lookup, no wait
    new = pb.GroupScored(sibling_group=decision.respend_group, task=TASK, round=1, step=2)
    assert (await arrival(bus, run, spec, new)).extra
