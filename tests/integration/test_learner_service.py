"""The learner service against a real nats-server and the sampler's real weight receiver.

Imports a private module: `treegrpo_sampler.backends._hf` (what these tests exercise is not on the
package's public surface).
"""

from __future__ import annotations

import asyncio
import hashlib
from pathlib import Path

import pytest

from tests.learner_events import learner_steps, run_spec, scored_group, start_run
from treegrpo import events
from treegrpo.bus import ADAPTERS
from treegrpo.config import NatsSettings, TelemetrySettings
from treegrpo.events import Kind
from treegrpo.v1 import events_pb2 as pb
from treegrpo_learner.config import LearnerConfig
from treegrpo_learner.service import LearnerService

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory) -> Path:
    from treegrpo.models import build_model

    return build_model(
        tmp_path_factory.mktemp("model") / "m", size="tiny", vocab_size=320, tokenizer_bytes=150_000
    )


def learner_config(nats_url: str, model: Path, tmp: Path, **kw) -> LearnerConfig:
    return LearnerConfig(
        model=str(model),
        checkpoint={"dir": str(tmp / "ckpt"), **kw.pop("checkpoint", {})},
        optimizer={"lr": 1e-3},
        torch_threads=1,
        nats=NatsSettings(url=nats_url),
        telemetry=TelemetrySettings(enabled=False),
        **kw,
    )


async def start(service: LearnerService, tracer=None) -> asyncio.Task:
    await service.setup()
    if tracer is not None:  # the process-wide provider belongs to whichever test set it first
        service.tracer = service.consumer.tracer = tracer
    return asyncio.create_task(service.run())


def memory_tracer():
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider.get_tracer("learner-test"), exporter


async def stop(service: LearnerService, task: asyncio.Task) -> None:
    await service.stop()
    await asyncio.wait_for(task, 30)
    await service.close()


async def wait_steps(bus, run_id: str, n: int, timeout: float = 60.0):
    deadline = asyncio.get_running_loop().time() + timeout
    while asyncio.get_running_loop().time() < deadline:
        steps = await learner_steps(bus, run_id)
        if len(steps) >= n:
            return steps
        await asyncio.sleep(0.2)
    raise AssertionError(f"only {len(await learner_steps(bus, run_id))} of {n} learner steps")


async def real_receiver(bus, model: Path, workdir: Path):
    from treegrpo_sampler import AdapterLoader, VersionGate, WeightReceiver
    from treegrpo_sampler.backends._hf import HfBackend

    workdir.mkdir(parents=True, exist_ok=True)
    backend = HfBackend(model, torch_threads=1)
    loader = AdapterLoader(backend, bus, VersionGate(), "s0", workdir, "sampler/test")
    receiver = WeightReceiver(loader, port=0, spool_dir=workdir)
    await receiver.start()
    return receiver, backend


@pytest.mark.parametrize("background", [True, False], ids=["checkpoint-after-load", "checkpoint-before-push"])
async def test_sync_step_trains_the_round_publishes_and_waits_for_the_sampler_to_load_it(
    bus, nats_server, tiny_model, tmp_path, background
):
    receiver, backend = await real_receiver(bus, tiny_model, tmp_path / "sampler")
    spec = run_spec("rs1", ["t1", "t2"], expansions=1, group_size=4)
    await start_run(bus, spec)
    cfg = learner_config(
        nats_server.url,
        tiny_model,
        tmp_path,
        publish={"sampler_endpoints": [receiver.address], "loaded_timeout_s": 10, "push_attempts": 2},
        checkpoint={"background": background},
    )
    service = LearnerService(cfg)
    tracer, spans = memory_tracer()
    task = await start(service, tracer)
    try:
        g1 = await scored_group(
            bus, "rs1", "t1", 1, 0, [0.9, 0.1, -0.5, 0.4], ["ok", "ok", "crashed", "ok"], vocab=320
        )
        await asyncio.sleep(1.0)
        assert await learner_steps(bus, "rs1") == [], "a sync step waits for every task's groups of the round"
        with tracer.start_as_current_span("grader publish") as grader_span:
            g2 = await scored_group(
                bus, "rs1", "t2", 1, 0, [-0.5, -0.5, -0.5, -0.5], ["crashed"] * 4, vocab=320
            )
        (step,) = await wait_steps(bus, "rs1", 1)
    finally:
        await stop(service, task)
        await receiver.stop()
    assert step.step == 1 and step.policy_version == 1
    assert sorted(step.sibling_groups) == sorted([g1, g2])
    assert step.groups_with_signal == 1  # the all-crashed group carries no signal
    assert list(step.staleness) == [0, 0]
    phases = step.phases_s
    for name in ("gen", "old_log_prob", "ref", "adv", "update_actor", "update_weights"):
        assert phases.HasField(name), name
    # before the push the save is a phase of its step; after the confirmed load it is off the path
    assert phases.HasField("save_checkpoint") is not background
    assert step.metrics["push_confirmed"] == 1.0
    published = (await bus.last_event("rs1", Kind.POLICY_PUBLISHED, "1")).policy_published
    data = await bus.get_object(ADAPTERS, "rs1/v1.tar")
    assert published.adapter_key == "rs1/v1.tar" and hashlib.sha256(data).hexdigest() == published.sha256
    assert published.bytes == len(data)
    loaded = (await bus.last_event("rs1", Kind.POLICY_LOADED, ("1", "s0"))).policy_loaded
    assert loaded.sha256 == published.sha256
    assert backend.version == 1
    assert (tmp_path / "ckpt" / "LATEST").read_text() == "step_000001"
    by_name = {sp.name: sp for sp in spans.get_finished_spans()}
    step_span = by_name["learner.step"]
    assert step_span.context.trace_id == grader_span.get_span_context().trace_id
    for phase in ("adv", "update_actor", "save_checkpoint", "update_weights"):
        assert by_name[phase].parent.span_id == step_span.context.span_id, phase
    save, push = by_name["save_checkpoint"], by_name["update_weights"]
    if background:  # written once the sampler confirmed the load; the stop waited for it
        assert save.start_time >= push.end_time and save.attributes["treegrpo.background"]
    else:
        assert save.end_time <= push.start_time


async def test_async_mode_drops_groups_older_than_max_staleness_and_counts_them(
    bus, nats_server, tiny_model, tmp_path
):
    spec = run_spec("ra1", ["t"], expansions=4, group_size=3, max_staleness=1)
    await start_run(bus, spec)
    cfg = learner_config(nats_server.url, tiny_model, tmp_path, step={"groups_per_step": 1})
    service = LearnerService(cfg)
    task = await start(service)
    rewards = [1.0, 0.0, 0.5]
    try:
        # a member the sampler recorded no tokens for (no completion) is left out, not fatal
        a = await scored_group(bus, "ra1", "t", 1, 0, rewards, version=0, vocab=320, empty=[2])
        await wait_steps(bus, "ra1", 1)
        b = await scored_group(bus, "ra1", "t", 1, 1, rewards, version=0, vocab=320)  # 1 behind: kept
        await wait_steps(bus, "ra1", 2)
        await scored_group(bus, "ra1", "t", 1, 2, rewards, version=0, vocab=320)  # 2 behind: dropped
        d = await scored_group(bus, "ra1", "t", 1, 3, rewards, version=2, vocab=320)
        steps = await wait_steps(bus, "ra1", 3)
    finally:
        await stop(service, task)
    assert [list(s.sibling_groups) for s in steps] == [[a], [b], [d]]
    assert [list(s.staleness) for s in steps] == [[0], [1], [0]]
    assert [s.groups_dropped_stale for s in steps] == [0, 0, 1]
    assert steps[0].metrics["sequences"] == 2 and steps[1].metrics["sequences"] == 3
    # each step's checkpoint is written after its push; the next step reports what it took
    assert "checkpoint_s" not in steps[0].metrics
    assert all(s.metrics["checkpoint_s"] > 0 for s in steps[1:])


async def test_an_unscoped_learner_lets_an_ended_run_go_once_its_checkpoint_is_written_then_takes_the_next(
    bus, nats_server, tiny_model, tmp_path, monkeypatch
):
    monkeypatch.setenv("TREEGRPO_HOME", str(tmp_path / "home"))  # one checkpoint folder per run
    for run_id in ("ru1", "ru2"):
        await start_run(bus, run_spec(run_id, ["t"], expansions=2, group_size=3, max_staleness=1))
    cfg = learner_config(
        nats_server.url, tiny_model, tmp_path, step={"groups_per_step": 1}, checkpoint={"dir": ""}
    )
    service = LearnerService(cfg)
    task = await start(service)
    try:
        await scored_group(bus, "ru1", "t", 1, 0, [1.0, 0.0, 0.5], vocab=320)
        await wait_steps(bus, "ru1", 1)
        ended = service.active
        await bus.publish(
            events.make_event("ru1", "test/runner", pb.RunEnded(outcome="completed", attempt=1))
        )
        for _ in range(100):  # let go: the model off the device, after the step's background save
            if ended.model is None:
                break
            await asyncio.sleep(0.1)
        assert ended.model is None and service.active is None
        assert (ended.ckpt_dir / "step_000001" / "adapter").is_dir()
        b = await scored_group(bus, "ru2", "t", 1, 0, [0.0, 1.0, 0.5], vocab=320)
        steps = await wait_steps(bus, "ru2", 1)
    finally:
        await stop(service, task)
    assert [list(s.sibling_groups) for s in steps] == [[b]]
    assert service.active.run_id == "ru2" and service.active.ckpt_dir != ended.ckpt_dir


@pytest.mark.timeout(240)
async def test_a_learner_without_its_checkpoint_folder_resumes_from_the_published_adapter(
    bus, nats_server, tiny_model, tmp_path
):
    import torch

    await start_run(bus, run_spec("rp1", ["t"], expansions=2, group_size=3, max_staleness=5))
    cfg = learner_config(nats_server.url, tiny_model, tmp_path, step={"groups_per_step": 1}, run_id="rp1")
    service = LearnerService(cfg)
    task = await start(service)
    try:
        a = await scored_group(bus, "rp1", "t", 1, 0, [1.0, 0.0, 0.4], vocab=320)
        await wait_steps(bus, "rp1", 1)
        weights = {k: v.clone() for k, v in service.active.model.state_dict().items() if "lora" in k}
    finally:
        await stop(service, task)
    import shutil

    shutil.rmtree(tmp_path / "ckpt")  # a pod restarted on another node: no local disk
    service = LearnerService(cfg)
    task = await start(service)
    try:
        while service.active is None:  # run_id is set: the model loads at start, before any group
            await asyncio.sleep(0.1)
        restored = {k: v for k, v in service.active.model.state_dict().items() if "lora" in k}
        assert all(torch.equal(weights[k], restored[k]) for k in weights)
        assert service.active.state.step == 1 and a in service.active.trained
        b = await scored_group(bus, "rp1", "t", 1, 1, [0.0, 1.0, 0.2], vocab=320)
        steps = await wait_steps(bus, "rp1", 2)
    finally:
        await stop(service, task)
    assert [list(s.sibling_groups) for s in steps] == [[a], [b]]
