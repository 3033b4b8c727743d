"""A learner step that runs out of device memory (real nats-server, the learner service in-process,
the tiny model on the CPU). torch raises its own `OutOfMemoryError` from a global forward hook, as
a CUDA device would from inside the step: the failed run lets go of its model before the reopen,
one such step is retried, and two in a row stop the learner with what to lower."""

from __future__ import annotations

import asyncio
import weakref
from pathlib import Path

import pytest

from tests.integration.test_learner_service import learner_config, start, stop, wait_steps
from tests.learner_events import learner_steps, run_spec, scored_group, start_run
from treegrpo_learner.service import LearnerService

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory) -> Path:
    from treegrpo.models import build_model

    return build_model(
        tmp_path_factory.mktemp("model") / "m", size="tiny", vocab_size=320, tokenizer_bytes=150_000
    )


class OutOfMemory:
    """Every module's forward raises CUDA's out-of-memory error while `left` > 0."""

    def __init__(self, times: int):
        self.left, self.raised = times, 0

    def __call__(self, module, args):
        import torch

        if self.left > 0:
            self.left -= 1
            self.raised += 1
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 184.00 MiB. GPU 0 ...")


async def opened(service: LearnerService):
    while service.active is None and not service.failure:  # run_id is set: it opens at start
        await asyncio.sleep(0.05)
    return service.active


async def run_with(bus, nats_server, tiny_model, tmp_path, run_id: str, oom: OutOfMemory, body):
    import torch

    await start_run(bus, run_spec(run_id, ["t"], expansions=2, group_size=3, max_staleness=5))
    cfg = learner_config(nats_server.url, tiny_model, tmp_path, step={"groups_per_step": 1}, run_id=run_id)
    service = LearnerService(cfg)
    hook = torch.nn.modules.module.register_module_forward_pre_hook(oom)
    task = await start(service)
    try:
        return await body(service)
    finally:
        hook.remove()
        await stop(service, task)


async def test_a_step_out_of_memory_twice_stops_the_learner_naming_what_to_lower(
    bus, nats_server, tiny_model, tmp_path
):
    oom = OutOfMemory(times=100)

    async def body(service):
        first = weakref.ref((await opened(service)).model)
        await scored_group(bus, "oom2", "t", 1, 0, [1.0, 0.0, 0.4], vocab=320)
        for _ in range(600):
            if service.failure:
                break
            await asyncio.sleep(0.05)
        return service.failure, first, service.config.packing.micro_batch_tokens

    failure, first, tokens = await run_with(bus, nats_server, tiny_model, tmp_path, "oom2", oom, body)
    assert oom.raised == 2  # the first retried from a reopened run, the second one stops it
    assert "step 1 ran out of device memory 2 times in a row" in failure
    assert f"learner.packing.micro_batch_tokens (now {tokens})" in failure
    assert "gradient_checkpointing" in failure and "version 0 stands" in failure
    assert first() is None  # the failed run's model was let go before the reopen loaded another
    assert await learner_steps(bus, "oom2") == []


async def test_one_step_out_of_memory_is_retried_and_the_group_is_trained_once(
    bus, nats_server, tiny_model, tmp_path
):
    oom = OutOfMemory(times=1)

    async def body(service):
        await opened(service)
        group = await scored_group(bus, "oom1", "t", 1, 0, [1.0, 0.0, 0.4], vocab=320)
        steps = await wait_steps(bus, "oom1", 1, 60)
        return group, steps, service.failure

    group, steps, failure = await run_with(bus, nats_server, tiny_model, tmp_path, "oom1", oom, body)
    assert oom.raised == 1 and not failure
    assert [list(s.sibling_groups) for s in steps] == [[group]]
