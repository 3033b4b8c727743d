"""A step's checkpoint written off the step's path (`checkpoint.background`, as torchtitan's async
checkpoint): after the version is pushed and its load confirmed, while the sampler generates the
next round. Before the push the save was 2.1-2.4 s of a 52 s step on the 9B (one H100); beside the
push it slowed the push's own disk writes (3.1-3.3 s). After the confirmed load the disk is idle and
the GPU busy with the next round.

What is saved is fixed when the save begins: the learner's state is copied, the optimizer's state
and RNG are captured then. The adapter and AdamW's moments are the live tensors on one device, so
the next step waits for the save before it trains (`settle`); in a synchronous run the next round's
generation is far longer than the save and the wait is zero. A crash before the save ends leaves
the previous checkpoint and this version's published adapter: the restore takes the adapter's
weights and starts AdamW's moments afresh, and its `learner.restored` fact says so, as it does
between the checkpoints of `checkpoint.every` > 1.
"""

from __future__ import annotations

import asyncio
import copy
import logging
import time
from dataclasses import dataclass
from pathlib import Path

from opentelemetry import trace

from treegrpo_learner import _checkpoint as ckpt

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Settled:
    """What waiting for a background checkpoint cost (all zero: none was being written)."""

    saved_s: float = 0.0  # the whole save, off the step's path
    waited_s: float = 0.0  # the part the next step waited for: its `save_checkpoint` phase
    failed: bool = False

    def metrics(self) -> dict[str, float]:
        if self.failed:
            return {"checkpoint_failed": 1.0}
        return {"checkpoint_s": self.saved_s} if self.saved_s else {}


class BackgroundSave:
    """At most one checkpoint being written; `settle` waits for it and says what it cost."""

    def __init__(self, root: Path, keep: int, tracer: trace.Tracer):
        self.root, self.keep, self.tracer = root, keep, tracer
        self._task: asyncio.Task | None = None
        self._step = 0

    @property
    def pending(self) -> bool:
        return self._task is not None

    def begin(self, state: ckpt.LearnerState, adapter, trainer_state: dict) -> None:
        """Start writing `state`'s checkpoint (copied now: the learner goes on changing its own).
        Its span is a child of the caller's (the step's), since the task takes the caller's context."""
        if self._task is not None:
            raise RuntimeError("a checkpoint is still being written: settle it first")
        frozen = copy.deepcopy(state)
        self._step = frozen.step
        self._task = asyncio.create_task(
            asyncio.to_thread(self._write, frozen, adapter, trainer_state), name=f"checkpoint-{frozen.step}"
        )

    def _write(self, state: ckpt.LearnerState, adapter, trainer_state: dict) -> float:
        with self.tracer.start_as_current_span("save_checkpoint") as span:
            span.set_attribute("treegrpo.background", True)
            t0 = time.perf_counter()
            ckpt.save(self.root, state, adapter, trainer_state, self.keep)
            took = time.perf_counter() - t0
        log.info("checkpoint of step %d written in %.2f s, in the background", state.step, took)
        return took

    async def settle(self) -> Settled:
        """Wait for the checkpoint being written. A failed save is logged, not raised: checkpoints
        are a cache of the log, and the next step's save tries again. Cancelling the caller does not
        cancel the save."""
        if self._task is None:
            return Settled()
        t0 = time.perf_counter()
        try:
            took = await asyncio.shield(self._task)
        except (OSError, ckpt.NonFiniteWeights) as exc:
            log.error(
                "the checkpoint of step %d was not written (%s); the next one tries again", self._step, exc
            )
            return Settled(waited_s=time.perf_counter() - t0, failed=True)
        finally:
            if self._task.done():
                self._task = None
        return Settled(saved_s=took, waited_s=time.perf_counter() - t0)
