"""A step that runs out of device memory: its memory returned, retried once, then a stop with a reason.

Seen on an H100 with the Qwen3.5-9B preset (made for an H200): the step ran out of memory, the
learner reopened the run as after any failed step, and the new run's model loaded into the blocks
the failed step had left in the allocator's cache. The device then showed 0.1 GiB free for good,
the colocated wait for free memory never ended, and the run hung without a word. So a failed
step's memory goes back to the device before the reopen, and an out-of-memory that comes again
is permanent: the same batch at the same settings does not fit, and retrying it loops forever.
The first one is retried: another tenant (an engine woken for another run) may have held the memory.
"""

from __future__ import annotations

import gc

from treegrpo_learner import _colocate

STRIKES = 2  # out-of-memory steps in a row that stop the learner


def out_of_memory(exc: BaseException) -> bool:
    """Whether a step's exception is the device running out of memory (torch's own class, or the
    message a wrapped one carries)."""
    import torch

    return isinstance(exc, torch.OutOfMemoryError) or (
        isinstance(exc, RuntimeError) and "out of memory" in str(exc).lower()
    )


def stop_reason(step: int, exc: BaseException, micro_batch_tokens: int) -> str:
    first = str(exc).splitlines()[0][:300] if str(exc) else type(exc).__name__
    return (
        f"step {step} ran out of device memory {STRIKES} times in a row ({first}); the same batch at "
        f"the same settings does not fit, so the learner stops: lower learner.packing.micro_batch_tokens "
        f"(now {micro_batch_tokens}), turn on learner.packing.gradient_checkpointing, or leave the "
        f"learner more of the GPU (a colocated engine's sampler.vllm.gpu_memory_utilization); nothing "
        f"of step {step} was saved or published (version {step - 1} stands)"
    )


def return_to_device(device: str) -> float | None:
    """After a failed run is shut down: collect what the failed step left in reference cycles (its
    traceback's frames hold its activations) and return the allocator's cache to the device; the
    device's free GiB afterwards (None off CUDA)."""
    gc.collect()
    return _colocate.release(device)
