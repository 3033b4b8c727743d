"""Sharing one GPU with the sampler's vLLM engine: wait for it to sleep, give the memory back.

In a synchronous run (max_staleness = 0) the sampler's engine and the learner take turns: the
engine sleeps once every run waits for the next policy version (vLLM sleep mode: weights to host
memory, KV cache dropped), the learner steps, returns its cached activation memory to the device,
and publishes; the engine wakes inside the adapter load. The learner cannot see the engine, so it
waits for what it needs, free device memory, rather than for a fact: any tenant that releases the
GPU lets it go on, and a learner on a GPU of its own (min_free_gib = 0) never waits.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time

from treegrpo.bus import PermanentError, TransientError

log = logging.getLogger(__name__)
POLL_S = 0.25


def _cuda(device: str):
    """`device` as a torch CUDA device, or None (the CPU, or no CUDA here): nothing to wait for or free."""
    import torch

    if not device.startswith("cuda") or not torch.cuda.is_available():
        return None
    return torch.device(device)


def memory_gib(device: str) -> tuple[float, float] | None:
    """(free, total) memory of a CUDA device in GiB (None: not a CUDA device)."""
    import torch

    if (dev := _cuda(device)) is None:
        return None
    free, total = torch.cuda.mem_get_info(dev)
    return free / 2**30, total / 2**30


def free_gib(device: str) -> float | None:
    """Free memory of a CUDA device in GiB (None: not a CUDA device)."""
    memory = memory_gib(device)
    return None if memory is None else memory[0]


async def wait_for_memory(device: str, min_free_gib: float, timeout_s: float) -> float:
    """Seconds waited until `device` has `min_free_gib` free; 0 when there is nothing to wait for."""
    if min_free_gib <= 0 or (free := free_gib(device)) is None:
        return 0.0
    started = time.perf_counter()
    logged = False
    if free < min_free_gib:
        import torch

        torch.cuda.empty_cache()  # blocks cached by this process are never what the wait is for
    while (free := free_gib(device)) is not None and free < min_free_gib:
        waited = time.perf_counter() - started
        if waited > timeout_s:
            # the engine may still be finishing a request or stuck: the step is retried later
            raise TransientError(
                f"{device}: {free:.1f} GiB free after {waited:.0f}s, the step needs {min_free_gib:.1f}", 10.0
            )
        if not logged:
            log.info(
                "%s: %.1f GiB free, waiting for %.1f (the sampler's engine to sleep)",
                device,
                free,
                min_free_gib,
            )
            logged = True
        await asyncio.sleep(POLL_S)
    return time.perf_counter() - started


def prepare_allocator(enabled: bool) -> bool:
    """Before CUDA starts in this process: expandable segments, so `release` can return every free
    page; False when off or the environment already chose the allocator's settings."""
    if not enabled or "PYTORCH_CUDA_ALLOC_CONF" in os.environ:
        return False
    os.environ["PYTORCH_CUDA_ALLOC_CONF"] = "expandable_segments:True"
    return True


def start_peak(device: str) -> None:
    """Count this process's peak device memory from here (a no-op off CUDA)."""
    import torch

    if (dev := _cuda(device)) is not None:
        torch.cuda.reset_peak_memory_stats(dev)


def peak_gib(device: str) -> float | None:
    """The most this process's allocator reserved since `start_peak`, in GiB (None off CUDA): what a
    memory plan must leave the learner beside a sleeping engine."""
    import torch

    if (dev := _cuda(device)) is None:
        return None
    return torch.cuda.max_memory_reserved(dev) / 2**30


def release(device: str) -> float | None:
    """Return the allocator's cached blocks (the step's activations) to the device; the device's
    free GiB afterwards (None off CUDA), logged beside what this process still holds."""
    import torch

    if (dev := _cuda(device)) is None:
        return None
    torch.cuda.synchronize(dev)
    torch.cuda.empty_cache()
    free = free_gib(device)
    log.info(
        "%s: released the step's memory: %.1f GiB free, this process holds %.1f GiB (%.1f allocated)",
        device,
        free,
        torch.cuda.memory_reserved(dev) / 2**30,
        torch.cuda.memory_allocated(dev) / 2**30,
    )
    return free


def unreachable(total_gib: float, held_gib: float, engine_gib: float, min_free_gib: float) -> str:
    """Why a colocated wait could never end on a device of `total_gib` where this process holds
    `held_gib` ('' when both can be met). Seen with the H200 presets on an 80 GB card: the learner
    waited for 75 GiB free beside its own 18 until its timeout, and then again, with no word why."""
    if engine_gib >= total_gib:
        return (
            f"learner.colocate.engine_gib = {engine_gib:g} is more than the device's {total_gib:.1f} GiB: "
            "set it below what the sampler's engine takes (its gpu_memory_utilization × the device)"
        )
    if min_free_gib > total_gib - held_gib:
        return (
            f"learner.colocate.min_free_gib = {min_free_gib:g} can never be free on a {total_gib:.1f} GiB "
            f"device where the learner holds {held_gib:.1f}: set it below {total_gib - held_gib:.0f} "
            "(the learner's step peak less what it holds; the seed presets' values are for a 139 GiB H200, "
            "seed-qwen35-9b-h100.toml's for an 80 GB card)"
        )
    return ""


def check_reachable(device: str, engine_gib: float, min_free_gib: float) -> None:
    """A `PermanentError` when the colocated waits can never end on `device` (after the model loaded)."""
    memory = memory_gib(device)
    if memory is None or (engine_gib <= 0 and min_free_gib <= 0):
        return
    import torch

    why = unreachable(
        memory[1], torch.cuda.memory_reserved(torch.device(device)) / 2**30, engine_gib, min_free_gib
    )
    if why:
        raise PermanentError(why)


async def wait_for_engine(device: str, engine_gib: float, settle_s: float, timeout_s: float) -> float:
    """Seconds waited before loading the base model: until the device holds `engine_gib` (the
    sampler's engine has started) and its use has stayed within 1 GiB for `settle_s`.

    vLLM sizes its KV cache from the memory it sees while it profiles at start; a learner loading
    tens of GB at that moment would be counted as the engine's own use (or leave it none), so the
    two never start together: the engine first, then the learner into what it left."""
    if engine_gib <= 0 or memory_gib(device) is None:
        return 0.0
    started = steady_since = time.perf_counter()
    last = -1.0
    while True:
        now = time.perf_counter()
        free, total = memory_gib(device) or (0.0, 0.0)
        used = total - free
        if abs(used - last) > 1.0 or used < engine_gib:
            steady_since, last = now, used
        elif now - steady_since >= settle_s:
            return now - started
        if now - started > timeout_s:
            raise TransientError(
                f"{device}: the sampler's engine did not start ({used:.1f} GiB in use)", 10.0
            )
        await asyncio.sleep(POLL_S)
