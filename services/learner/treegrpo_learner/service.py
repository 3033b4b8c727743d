"""LearnerService: consume scored groups, step when a batch is ready, publish each version.

Handlers: `run.started` (warm the model for the run), `group.scored` (gather the members' training
data and wait, unacknowledged, until the group has been trained into a durable version or dropped
as stale). A separate loop takes batches from the buffer and steps. Start it with

    treegrpo serve learner --set model=/path/to/model --set publish.sampler_endpoints='["127.0.0.1:50151"]'
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from traceback import format_exc

from opentelemetry import trace

from treegrpo import events
from treegrpo.bus import ConsumerOptions, Deferred, Delivery, PermanentError, TransientError
from treegrpo.config import RunSpec
from treegrpo.events import Kind
from treegrpo.service import PERMANENT_SETUP_ERRORS, Service
from treegrpo.v1 import events_pb2 as pb
from treegrpo_learner import _colocate, _memory, _respend
from treegrpo_learner._buffer import PendingGroup
from treegrpo_learner._checkpoint import NonFiniteWeights
from treegrpo_learner._numeric import NonFiniteStep
from treegrpo_learner._run_learner import RunLearner
from treegrpo_learner._wandb import StepLogger
from treegrpo_learner.config import LearnerConfig

log = logging.getLogger(__name__)


class LearnerService(Service):
    name = "learner"
    config_cls = LearnerConfig

    def __init__(self, config: LearnerConfig, instance: str | None = None):
        super().__init__(config, instance)
        self.config: LearnerConfig = config
        co = config.colocate
        _colocate.prepare_allocator(co.release_after_step and co.expandable_segments)  # before CUDA starts
        self.active: RunLearner | None = None
        self._opening = asyncio.Lock()
        self._stepping = asyncio.Lock()  # held while the loop steps a run
        self._released: asyncio.Task | None = None  # an ended run being let go (`_release`)
        self._loop: asyncio.Task | None = None
        self._warm: asyncio.Task | None = None
        self._last_step_end = time.monotonic()
        self._dropped_since_step = 0
        self._oom_in_a_row = 0  # steps in a row that ran out of device memory (_memory)
        self.steps: list[pb.LearnerStepped] = []
        self.wandb = StepLogger(config.wandb)

    def handlers(self):
        return {
            Kind.RUN_STARTED: self.on_run_started,
            Kind.GROUP_SCORED: self.on_group_scored,
            Kind.RUN_ENDED: self.on_run_ended,
        }

    def consumer_options(self) -> ConsumerOptions:
        # every waiting group holds its message unacked; heartbeats keep them from redelivery
        return ConsumerOptions(
            max_inflight=self.config.max_inflight_groups, ack_wait_s=self.config.ack_wait_s
        )

    async def on_setup(self) -> None:
        self._loop = asyncio.create_task(self._train_loop(), name="learner-train-loop")
        if self.config.run_id:  # load the policy and restore now, not at the first group
            self._warm = asyncio.create_task(self._warm_up(self.config.run_id), name="learner-warm-up")

    async def _warm_up(self, run_id: str) -> None:
        while not self.stopping.is_set() and self.active is None:
            try:
                if await self._ensure_run(run_id) is None:
                    return  # a search-only run
            except TransientError:
                await asyncio.sleep(1.0)

    async def stop(self) -> None:
        await super().stop()
        if self.active is not None:
            self.active.buffer.fail_all(TransientError("learner stopping", 1.0))

    async def on_stop(self) -> None:
        for t in (self._loop, self._warm):
            if t is not None:
                t.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await t
        await self._released_run()
        if self.active is not None:
            await self.active.close()
        self.wandb.close()

    # ---- handlers ------------------------------------------------------------------------------
    async def on_run_started(self, event: pb.Event, delivery: Delivery) -> None:
        run_id = event.envelope.run_id
        try:  # checked even while busy with another run: a bad spec is dead-lettered, never acked
            spec = RunSpec.of_run(run_id, event.run_started.run_spec_json)
        except ValueError as exc:  # nothing a retry can fix (it was retried for minutes)
            raise PermanentError(f"bad run spec: {exc}") from exc
        if self.active is None and (not self.config.run_id or self.config.run_id == run_id):
            if spec.train:
                await self._ensure_run(run_id)

    async def on_run_ended(self, event: pb.Event, delivery: Delivery) -> None:
        """The run this learner trains ended (stopped, failed, completed): let it go, so an
        unscoped learner can take the next run. Its waiting groups go back unacked."""
        misfit = await self.bus.attempt_misfit(event.envelope.run_id, event)
        if misfit:  # else a forged end of an attempt that never was would let the run go
            raise TransientError(f"run {event.envelope.run_id}: {misfit}", 2.0)
        run = self.active
        if run is None or run.run_id != event.envelope.run_id or self.config.run_id:
            await self._require_started(event.envelope.run_id)  # else dead-lettered, with the reason
            return  # a scoped learner stops with its runner
        async with self._opening:
            if self.active is run:
                log.info("run %s ended (%s); releasing it", run.run_id, event.run_ended.outcome)
                run.buffer.fail_all(TransientError(f"run {run.run_id} ended", 30.0))
                self.active = None
                self._released = asyncio.create_task(self._release(run), name=f"learner-release-{run.run_id}")

    async def _release(self, run: RunLearner) -> None:
        """Let an ended run go once its step (if one runs) is over: not beside the next run's model."""
        async with self._stepping:
            await self._let_go(run)

    async def _let_go(self, run: RunLearner) -> None:
        """Close the run (its checkpoint written first; a sharded learner's ranks stop), free its memory."""
        await run.close()
        await asyncio.to_thread(_memory.return_to_device, self.config.device)

    async def _released_run(self) -> None:
        """Wait for the ended run's release, if one is under way (before a run opens, at stop)."""
        task, self._released = self._released, None
        try:
            if task is not None:
                await task
        except Exception as exc:  # the run is gone either way; its checkpoint is a cache of the log
            log.warning("letting the ended run go failed: %r", exc)

    async def on_group_scored(self, event: pb.Event, delivery: Delivery) -> None:
        run_id = event.envelope.run_id
        if self.config.run_id and run_id != self.config.run_id:
            return
        gs = event.group_scored
        misfit = events.misderived(run_id, gs)
        if misfit:  # no grader of ours scored it: training on it would train a group the run never had
            raise PermanentError(f"not a group of run {run_id}: {misfit}")
        run = await self._ensure_run(run_id)
        if run is None or gs.sibling_group in run.trained or not gs.members:
            return  # search-only run, already trained (a redelivery after a crash), or empty
        if gs.sibling_group in run.inflight:  # a redelivery while its step runs: share that outcome
            await asyncio.shield(run.inflight[gs.sibling_group])
            return
        arrival = await _respend.arrival(self.bus, run_id, run.spec, gs)  # Deferred: no decision yet
        members = await run.members(gs)
        ctx = trace.get_current_span().get_span_context()
        group = run.buffer.add(
            PendingGroup(
                gs.sibling_group,
                gs.task,
                gs.round,
                gs.step,
                delivery.stream_seq,
                members,
                asyncio.get_running_loop().create_future(),
                ctx,
                arrival.extra,
                arrival.expects,
            )
        )
        await asyncio.shield(group.done)

    async def _ensure_run(self, run_id: str) -> RunLearner | None:
        async with self._opening:
            if self.active is not None:
                if self.active.run_id != run_id:
                    await self._require_started(run_id)  # a run that does not exist is not waiting
                    # one run at a time: the other run's groups wait (never dead-lettered for it)
                    raise Deferred(f"learner is busy with run {self.active.run_id}", 30.0)
                return self.active
            try:
                started = await self.bus.run_start(run_id)
            except ValueError as exc:  # the recorded spec does not validate, or is another run's
                raise PermanentError(f"bad run spec: {exc}") from exc
            if started is None:
                raise TransientError(f"run {run_id} has no run.started yet", 2.0)
            spec = started.spec
            if not spec.train:
                return None
            if not self.config.run_id and not (await self.bus.run_ends(run_id)).open:
                raise TransientError(f"run {run_id} has ended; not training it", 30.0)
            await self._released_run()  # the last run's model off the device before this one loads
            run = RunLearner(self.config, run_id, spec, self.bus, self.producer, self.tracer)
            try:
                await run.open()
            except PERMANENT_SETUP_ERRORS as exc:  # no model, nothing to rebuild from: nak, stop, say why
                reason = exc.reason if isinstance(exc, PermanentError) else f"{type(exc).__name__}: {exc}"
                self.fail(f"cannot open run {run_id}: {reason}")
                raise TransientError(reason, 30.0) from exc
            for note in run.restore_notes:
                self.note_error(note)
            self.active = run
            self.wandb.start(run_id, self.config)
            return run

    async def _require_started(self, run_id: str) -> pb.Event:
        started = await self.bus.last_event(run_id, Kind.RUN_STARTED)
        if started is None:
            raise TransientError(f"run {run_id} has no run.started yet", 2.0)
        return started

    # ---- the loop ------------------------------------------------------------------------------
    async def _train_loop(self) -> None:
        while not self.stopping.is_set():
            run = self.active
            if run is None:
                await asyncio.sleep(0.2)
                continue
            batch = run.buffer.take(
                run.need, run.state.step, run.spec.max_staleness, run.sync, run.consumed_in_round
            )
            if batch is None:
                run.buffer.changed.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(run.buffer.changed.wait(), 1.0)
                continue
            if batch.stale:
                run.drop_stale(batch)
                self._dropped_since_step += len(batch.stale)
            if batch.groups:
                async with self._stepping:
                    await self._step(run, batch)

    async def _step(self, run: RunLearner, batch) -> None:
        waited = time.monotonic() - self._last_step_end
        try:
            record = await run.step(batch, waited, self._dropped_since_step)
        except (NonFiniteWeights, NonFiniteStep) as exc:  # retrying the batch from the same weights: the same
            for g in batch.groups:
                if not g.done.done():
                    g.done.set_exception(TransientError(str(exc), 30.0))
            run.buffer.fail_all(TransientError("learner stopping", 30.0))
            self.fail(str(exc))
            return
        except Exception as exc:  # the in-memory policy may be half-updated: rebuild from durable state
            # formatted here, not handed to logging: a handler that keeps its records (a test's
            # capture, a buffering exporter) would keep the traceback and its frames, the step's
            # activations on the device with them
            log.error(
                "step failed; reopening run %s from its last durable version\n%s", run.run_id, format_exc()
            )
            why = f"step failed: {type(exc).__name__}: {exc}"
            # read while the exception lives; only an out-of-memory can stop the learner from here
            oom_reason = (
                _memory.stop_reason(run.state.step + 1, exc, self.config.packing.micro_batch_tokens)
                if _memory.out_of_memory(exc)
                else ""
            )
        else:
            self._stepped(record)
            return
        # out of the except block: the exception and its frames (the step's activations) are gone
        await self._reopen(run, batch, why)
        self._oom_in_a_row = self._oom_in_a_row + 1 if oom_reason else 0
        if self._oom_in_a_row >= _memory.STRIKES:
            self.fail(oom_reason)

    async def _reopen(self, run: RunLearner, batch, why: str) -> None:
        """Fail the batch's groups back to the stream and drop the run; the next group reopens it
        from its last durable version, into memory the failed one returned."""
        for g in batch.groups:
            if not g.done.done():
                g.done.set_exception(TransientError(why, 5.0))
        run.buffer.fail_all(TransientError("learner reopening", 2.0))
        self.active = None
        await self._let_go(run)

    def _stepped(self, record: pb.LearnerStepped) -> None:
        self._oom_in_a_row = 0
        self._dropped_since_step = 0
        self._last_step_end = time.monotonic()
        self.steps.append(record)
        self.wandb.log(record)
        peak = record.metrics.get("device_peak_gib")
        log.info(
            "step %d: %d groups (%d with signal), loss %.4f, %.1fs%s",
            record.step,
            len(record.sibling_groups),
            record.groups_with_signal,
            record.metrics.get("loss", 0.0),
            record.total_s,
            "" if peak is None else f", device peak {peak:.1f} GiB",
        )
