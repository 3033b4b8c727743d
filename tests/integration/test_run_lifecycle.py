"""Runs on one NATS stay apart: unique run ids, a start that cannot be joined, every attempt's end
on the log, and services that never pick up a run whose latest attempt ended (real nats-server,
a real sampler on a tiny model).

Imports a private module: `treegrpo_learner._model` (what these tests exercise is not on the package's
public surface).
"""

from __future__ import annotations

import asyncio

import pytest

from tests.integration.test_sampler_service import config, stop
from treegrpo import events
from treegrpo.config import ConfigError, RunSpec
from treegrpo.events import Kind
from treegrpo.runner import claim_run, end_run, new_run_id, record_end, reopen_run
from treegrpo_sampler.service import SamplerService

pytestmark = pytest.mark.timeout(150)


def test_run_ids_started_in_the_same_second_differ():
    ids = {new_run_id() for _ in range(200)}
    assert len(ids) == 200 and all(events.check_token(i, "run id") for i in ids)
    assert len({i.rsplit("_", 1)[0] for i in ids}) <= 2  # the same second (or two), still 200 ids


async def test_an_existing_run_id_is_refused_not_joined(bus):
    await claim_run(bus, RunSpec(run_id="dup", tasks=["spooky-mini"], rounds=1))
    with pytest.raises(ConfigError, match="already exists"):
        await claim_run(bus, RunSpec(run_id="dup", tasks=["cactus-mini"], rounds=5))
    started = [e async for _s, e in bus.replay("dup", kinds=[Kind.RUN_STARTED])]
    assert len(started) == 1 and list(started[0].run_started.tasks) == ["spooky-mini"]


async def test_each_attempt_ends_on_the_log_and_a_resume_reopens_the_run(bus):
    await claim_run(bus, RunSpec(run_id="life", tasks=["spooky-mini"], rounds=1))
    assert (await bus.run_ends("life")).open
    await end_run(bus, "life", 1, "stopped", "interrupted")
    ends = await bus.run_ends("life")
    assert not ends.open and ends.ended == 1
    assert await reopen_run(bus, "life") == 2
    assert (await bus.run_ends("life")).open
    assert await reopen_run(bus, "life") == 2  # still open: no second resume fact
    await end_run(bus, "life", 2, "completed", "every round complete")
    ends = await bus.run_ends("life")
    assert ends.completed and not ends.open
    kinds = [
        (events.kind_of(e), getattr(events.body_of(e), "outcome", "")) async for _s, e in bus.replay("life")
    ]
    assert kinds == [
        (Kind.RUN_STARTED, ""),
        (Kind.RUN_ENDED, "stopped"),
        (Kind.RUN_RESUMED, ""),
        (Kind.RUN_COMPLETED, "completed"),
        (Kind.RUN_ENDED, "completed"),
    ]


async def test_an_end_recorded_again_after_a_lost_ack_is_on_the_log_once(bus):
    await claim_run(bus, RunSpec(run_id="twice", tasks=["spooky-mini"], rounds=1))
    assert await record_end(bus, "twice", 1, "completed", "every round complete", 5.0)
    assert await record_end(bus, "twice", 1, "completed", "every round complete", 5.0)  # the retry
    kinds = [events.kind_of(e) async for _s, e in bus.replay("twice")]
    assert kinds == [Kind.RUN_STARTED, Kind.RUN_COMPLETED, Kind.RUN_ENDED]


async def test_an_end_that_cannot_be_recorded_is_reported_within_its_wait(bus, nats_server):
    await claim_run(bus, RunSpec(run_id="lost", tasks=["spooky-mini"], rounds=1))
    nats_server.stop()  # NATS gone just as the run closes
    loop = asyncio.get_running_loop()
    t0 = loop.time()
    assert not await record_end(bus, "lost", 1, "stopped", "interrupted", 2.0)
    assert loop.time() - t0 < 6.0


async def test_a_sampler_serving_every_run_never_resumes_one_that_ended(
    bus, nats_server, tiny, public, tmp_path
):
    for run in ("ended", "open"):
        await claim_run(bus, RunSpec(run_id=run, tasks=["spooky-mini"], rounds=1))
    await end_run(bus, "ended", 1, "stopped", "interrupted")
    svc = SamplerService(config(tiny, public, nats_server, tmp_path), "s1")
    await svc.setup()
    task = asyncio.create_task(svc.run())
    try:
        assert "open" in svc.runs and "ended" not in svc.runs
        await asyncio.sleep(3.0)
        assert [e async for _s, e in bus.replay("ended", kinds=[Kind.NODE_SAMPLED])] == []
        await reopen_run(bus, "ended")  # `treegrpo run --resume ended`
        deadline = asyncio.get_running_loop().time() + 60
        while not [e async for _s, e in bus.replay("ended", kinds=[Kind.NODE_SAMPLED])]:
            assert asyncio.get_running_loop().time() < deadline, "the resumed run was not sampled"
            await asyncio.sleep(0.5)
    finally:
        await stop(svc, task)


async def test_a_scoped_service_consumes_its_own_run_alone(bus, nats_server, tiny, public, tmp_path):
    svc = SamplerService(config(tiny, public, nats_server, tmp_path, run_id="mine"), "s1")
    await svc.setup()
    task = asyncio.create_task(svc.run())
    try:
        while svc.consumer.loop_at == 0:  # bound on its first turn
            await asyncio.sleep(0.05)
        await asyncio.sleep(0.2)
        info = await bus.js.consumer_info("TREEGRPO", "sampler-mine")
        assert sorted(info.config.filter_subjects) == sorted(
            f"tg.mine.{k}" + ("" if k in (Kind.RUN_STARTED, Kind.RUN_COMPLETED) else ".>")
            for k in svc.handlers()
        )
    finally:
        await stop(svc, task)


@pytest.mark.slow  # ~35 s: the waiting run's group comes back after the learner's 30 s "busy" delay
async def test_a_learner_serving_every_run_takes_the_next_run_once_the_first_ended(
    bus, nats_server, tmp_path, monkeypatch
):
    from tests.learner_events import learner_steps, run_spec, scored_group, start_run
    from treegrpo_learner._model import save_tiny
    from treegrpo_learner.config import LearnerConfig
    from treegrpo_learner.service import LearnerService

    monkeypatch.setenv("TREEGRPO_HOME", str(tmp_path / "home"))  # checkpoints per run under it
    model = save_tiny(tmp_path / "model")
    for run in ("la", "lb"):
        await start_run(bus, run_spec(run, ["t"], expansions=2, group_size=3, max_staleness=50))
    svc = LearnerService(
        LearnerConfig(
            model=str(model),
            step={"groups_per_step": 1},
            torch_threads=1,
            optimizer={"lr": 1e-3},
            nats={"url": nats_server.url},
            telemetry={"enabled": False},
        )
    )
    await svc.setup()
    task = asyncio.create_task(svc.run())

    async def steps_of(run: str, n: int, timeout: float) -> list:
        deadline = asyncio.get_running_loop().time() + timeout
        while len(steps := await learner_steps(bus, run)) < n:
            assert asyncio.get_running_loop().time() < deadline, f"{run}: {len(steps)} steps"
            await asyncio.sleep(0.2)
        return steps

    try:
        await scored_group(bus, "la", "t", 1, 0, [1.0, 0.0, 0.5])
        await steps_of("la", 1, 60)
        await scored_group(bus, "lb", "t", 1, 0, [1.0, 0.0, 0.5])
        await asyncio.sleep(2.0)
        assert await learner_steps(bus, "lb") == []  # one run at a time: lb waits while la is open
        await end_run(bus, "la", 1, "completed", "every round complete")
        (step,) = await steps_of("lb", 1, 75)
        assert step.policy_version == 1  # a fresh policy for lb, not la's v1 continued
    finally:
        await stop(svc, task)


async def test_a_scoped_sampler_stops_for_good_on_a_task_that_does_not_exist(
    bus, nats_server, tiny, public, tmp_path
):
    await claim_run(bus, RunSpec(run_id="notask", tasks=["no-such-task"], rounds=1))
    svc = SamplerService(config(tiny, public, nats_server, tmp_path, run_id="notask"), "s1")
    await svc.setup()
    task = asyncio.create_task(svc.run())
    try:
        await asyncio.wait_for(task, 60)  # it stops itself: a retry cannot bring the task
        assert "no-such-task" in svc.failure
    finally:
        await svc.close()


async def test_a_sampler_serving_every_run_gives_the_runs_turns(bus, nats_server, tiny, public, tmp_path):
    for run in (
        "fa",
        "fb",
    ):  # two drafts each: without turns the first run would take both slots' worth first
        await claim_run(
            bus,
            RunSpec(
                run_id=run,
                tasks=["spooky-mini"],
                rounds=1,
                tree={"expansions": 2, "group_size": 1, "drafts": 2},
            ),
        )
    svc = SamplerService(config(tiny, public, nats_server, tmp_path), "s1")
    await svc.setup()
    task = asyncio.create_task(svc.run())
    try:
        deadline = asyncio.get_running_loop().time() + 90
        while svc.groups_sampled < 4:
            assert asyncio.get_running_loop().time() < deadline, svc.groups_sampled
            await asyncio.sleep(0.2)
    finally:
        await stop(svc, task)
    order = []
    for run in ("fa", "fb"):
        order += [(seq, run) async for seq, _e in bus.replay(run, kinds=[Kind.NODE_SAMPLED])]
    runs = [run for _seq, run in sorted(order)]
    assert runs in (["fa", "fb", "fa", "fb"], ["fb", "fa", "fb", "fa"]), runs
