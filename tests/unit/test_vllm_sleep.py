"""The vllm backend's sleep mode, against a stand-in for vLLM's AsyncLLM (its sleep/wake_up/add_lora
surface): the engine sleeps only when nothing runs, wakes before serving, and the times are kept."""

import asyncio

from treegrpo_sampler.backends._vllm import VllmBackend
from treegrpo_sampler.config import VllmSettings


class EngineStandIn:
    def __init__(self):
        self.calls: list[str] = []

    async def sleep(self, level: int) -> None:
        self.calls.append(f"sleep {level}")
        await asyncio.sleep(0.01)

    async def wake_up(self) -> None:
        self.calls.append("wake")
        await asyncio.sleep(0.01)


def backend(sleep: bool = True) -> tuple[VllmBackend, EngineStandIn]:
    b = VllmBackend("m", VllmSettings(sleep_when_idle=sleep))
    b._engine = engine = EngineStandIn()
    return b, engine


async def test_an_idle_engine_sleeps_once_and_wakes_once_with_both_times_kept():
    b, engine = backend()
    assert await b.sleep() and b.asleep
    assert not await b.sleep()  # already asleep: nothing sent
    assert await b.wake() > 0 and not b.asleep
    assert await b.wake() == 0.0
    assert engine.calls == ["sleep 1", "wake"]
    assert b.last_sleep_seconds > 0 and b.last_wake_seconds > 0


async def test_an_engine_with_a_request_running_or_without_sleep_mode_stays_awake():
    b, engine = backend()
    b._inflight[0] += 1
    assert not await b.sleep()
    off, off_engine = backend(sleep=False)
    assert not await off.sleep()
    assert engine.calls == off_engine.calls == []
