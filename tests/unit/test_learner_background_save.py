"""A step's checkpoint written in the background: the state as it was when the save began, the
next step waiting for it, a failure reported rather than raised, and a cancelled waiter leaving the
save to finish (real peft adapters, real files).

Imports a private module: `treegrpo_learner._saving`, `treegrpo_learner._checkpoint`,
`treegrpo_learner._model` (what these tests exercise is not on the package's public surface).
"""

from __future__ import annotations

import asyncio
import threading

import pytest
from opentelemetry import trace

from treegrpo_learner import _checkpoint as ckpt
from treegrpo_learner._model import tiny_qwen3, wrap_lora
from treegrpo_learner._saving import BackgroundSave, Settled
from treegrpo_learner.config import LoraSettings

pytestmark = pytest.mark.timeout(60)


class GatedTracer(trace.NoOpTracer):
    """Holds the save at its span's start until the test opens the gate."""

    def __init__(self):
        self.gate = threading.Event()

    def start_as_current_span(self, *args, **kwargs):
        assert self.gate.wait(30)
        return super().start_as_current_span(*args, **kwargs)


def adapter():
    return wrap_lora(tiny_qwen3(seed=0), LoraSettings(r=4, alpha=8))


async def test_the_checkpoint_holds_the_state_as_it_was_when_the_save_began(tmp_path):
    saver = BackgroundSave(tmp_path / "ckpt", keep=2, tracer=GatedTracer())
    state = ckpt.LearnerState(run_id="r", step=1, trained=["g1"])
    saver.begin(state, adapter(), {"opt": 1})
    state.step, state.trained = 2, ["g1", "g2"]  # the learner goes on while the save waits
    saver.tracer.gate.set()
    settled = await saver.settle()
    assert settled.saved_s > 0 and not settled.failed and not saver.pending
    assert settled.metrics() == {"checkpoint_s": settled.saved_s}
    path, damaged = ckpt.newest_good(tmp_path / "ckpt")
    saved_state, trainer_state, _ = ckpt.load(path)
    assert damaged == [] and path.name == "step_000001"
    assert (saved_state.step, saved_state.trained, trainer_state) == (1, ["g1"], {"opt": 1})


async def test_the_next_step_waits_for_a_save_that_is_not_done_and_says_how_long(tmp_path):
    saver = BackgroundSave(tmp_path / "ckpt", keep=2, tracer=GatedTracer())
    saver.begin(ckpt.LearnerState(run_id="r", step=1), adapter(), {})
    waiter = asyncio.create_task(saver.settle())
    await asyncio.sleep(0.3)
    assert not waiter.done() and saver.pending
    saver.tracer.gate.set()
    settled = await waiter
    assert settled.waited_s >= 0.3 and settled.saved_s > 0


async def test_settling_with_nothing_being_written_costs_nothing(tmp_path):
    saver = BackgroundSave(tmp_path / "ckpt", keep=2, tracer=trace.NoOpTracer())
    settled = await saver.settle()
    assert settled == Settled() and settled.metrics() == {}


async def test_a_failed_save_is_reported_not_raised_and_the_next_one_is_written(tmp_path):
    root = tmp_path / "ckpt"
    root.write_text("a file where the folder should be")
    saver = BackgroundSave(root, keep=2, tracer=trace.NoOpTracer())
    model = adapter()
    saver.begin(ckpt.LearnerState(run_id="r", step=1), model, {})
    settled = await saver.settle()
    assert settled.failed and settled.metrics() == {"checkpoint_failed": 1.0} and not saver.pending
    root.unlink()
    saver.begin(ckpt.LearnerState(run_id="r", step=2), model, {})
    assert not (await saver.settle()).failed
    assert ckpt.newest_good(root) == (root / "step_000002", [])


async def test_a_cancelled_waiter_leaves_the_save_to_finish_for_the_next_one(tmp_path):
    saver = BackgroundSave(tmp_path / "ckpt", keep=2, tracer=GatedTracer())
    saver.begin(ckpt.LearnerState(run_id="r", step=1), adapter(), {})
    waiter = asyncio.create_task(saver.settle())  # a step cancelled by the service's stop
    await asyncio.sleep(0.1)
    waiter.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiter
    assert saver.pending
    saver.tracer.gate.set()
    settled = await saver.settle()  # the stop's own wait, before the model is let go
    assert settled.saved_s > 0 and not settled.failed
    assert ckpt.newest_good(tmp_path / "ckpt") == (tmp_path / "ckpt" / "step_000001", [])


async def test_a_second_save_before_the_first_is_settled_is_refused(tmp_path):
    saver = BackgroundSave(tmp_path / "ckpt", keep=2, tracer=GatedTracer())
    model = adapter()
    saver.begin(ckpt.LearnerState(run_id="r", step=1), model, {})
    with pytest.raises(RuntimeError, match="still being written"):
        saver.begin(ckpt.LearnerState(run_id="r", step=2), model, {})
    saver.tracer.gate.set()
    await saver.settle()
