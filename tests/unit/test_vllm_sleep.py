"""The vllm backend's sleep mode, against a stand-in for vLLM's AsyncLLM (its sleep/wake_up/add_lora
surface): the engine sleeps only when nothing runs, wakes before serving, and the times are kept.

Imports a private module: `treegrpo_sampler.backends._vllm` (what these tests exercise is not on the
package's public surface).
"""

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


class LoadingEngine(EngineStandIn):
    """add_lora takes a while, as reading ~173 MB of adapter does on the 9B."""

    async def add_lora(self, request) -> None:
        self.calls.append(f"add_lora {request.lora_name}")
        await asyncio.sleep(0.05)


class LoRARequestStandIn:
    def __init__(self, name, lora_id, path):
        self.lora_name, self.lora_int_id, self.path = name, lora_id, path


async def test_a_sleep_decided_under_the_old_version_never_falls_inside_an_adapter_load(
    tmp_path, monkeypatch
):
    # seen on the H200: the pump decided "every run waits for a new version" under v1 while v2 was
    # loading, and the engine fell asleep between the load's wake and the new version
    import sys
    import types

    lora_mod = types.ModuleType("vllm.lora.request")
    lora_mod.LoRARequest = LoRARequestStandIn
    for name, mod in (("vllm", types.ModuleType("vllm")), ("vllm.lora", types.ModuleType("vllm.lora"))):
        monkeypatch.setitem(sys.modules, name, mod)
    monkeypatch.setitem(sys.modules, "vllm.lora.request", lora_mod)
    (tmp_path / "adapter_config.json").write_text("{}")
    b = VllmBackend(str(tmp_path / "model"), VllmSettings(sleep_when_idle=True))
    b._engine = engine = LoadingEngine()
    assert await b.sleep(0)  # the learner steps
    decided_under = b.version
    load = asyncio.create_task(b.load_adapter(1, tmp_path))
    await asyncio.sleep(0.01)  # the load holds the lock: woken, adding the adapter
    assert not await b.sleep(decided_under)  # waited for the load, then refused: v1 serves now
    await load
    assert b.version == 1 and not b.asleep
    assert engine.calls == ["sleep 1", "wake", "add_lora policy-v1-1"]


class CrowdedEngine(EngineStandIn):
    """What vLLM 0.26 raised on the H200 when the 27B's engine woke into 72.7 GiB after the
    learner's step (it needed the 73.3 GiB its sleep had freed)."""

    async def wake_up(self) -> None:
        self.calls.append("wake")
        raise RuntimeError(
            "Call to wake_up method failed: CUDA Error: out of memory at "
            "/workspace/csrc/cumem_allocator.cpp:163"
        )


async def test_a_wake_out_of_memory_is_an_engine_lost_for_good_with_the_knob_to_turn():
    from treegrpo_sampler.backends import EngineLost

    b = VllmBackend("m", VllmSettings(sleep_when_idle=True))
    b._engine = CrowdedEngine()
    assert await b.sleep()
    try:
        await b.wake()
    except EngineLost as exc:
        assert "gpu_memory_utilization" in str(exc) and "out of memory" in str(exc)
    else:
        raise AssertionError("a wake that ran out of memory passed")
    assert b.asleep  # nothing pretends the engine is back


async def test_any_other_wake_failure_is_not_taken_for_lost_memory():
    class Broken(EngineStandIn):
        async def wake_up(self) -> None:
            raise RuntimeError("engine core died")

    b = VllmBackend("m", VllmSettings(sleep_when_idle=True))
    b._engine = Broken()
    assert await b.sleep()
    try:
        await b.wake()
    except RuntimeError as exc:
        assert type(exc) is RuntimeError and "engine core died" in str(exc)
    else:
        raise AssertionError("the failure vanished")
