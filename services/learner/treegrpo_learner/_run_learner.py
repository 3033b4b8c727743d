"""One run's learner: the policy, its durable state, restore after a crash, and the step itself."""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import asdict, replace
from pathlib import Path

from google.protobuf.json_format import MessageToDict
from opentelemetry import trace

from treegrpo import events
from treegrpo.bus import Bus
from treegrpo.config import RunSpec, treegrpo_home
from treegrpo.v1 import events_pb2 as pb
from treegrpo_learner import _checkpoint as ckpt
from treegrpo_learner import _colocate
from treegrpo_learner._archive import Archive, write_version
from treegrpo_learner._buffer import Batch, GroupBuffer, Member, read_members
from treegrpo_learner._model import load_base, wrap_lora
from treegrpo_learner._numeric import check_finite, numeric_fault, step_fault
from treegrpo_learner._publish import Published, Publisher
from treegrpo_learner._restore import Restorer
from treegrpo_learner._samples import BatchSamples, batch_samples
from treegrpo_learner._saving import BackgroundSave
from treegrpo_learner._telemetry import phase_spans, step_context, step_record
from treegrpo_learner._trainer import PolicyTrainer, StepOutput, TrainerSettings, TrainSample
from treegrpo_learner.config import LearnerConfig

log = logging.getLogger(__name__)


class RunLearner:
    def __init__(
        self, cfg: LearnerConfig, run_id: str, spec: RunSpec, bus: Bus, producer: str, tracer: trace.Tracer
    ):
        self.cfg, self.run_id, self.spec, self.bus = cfg, run_id, spec, bus
        self.producer, self.tracer = producer, tracer
        self.buffer = GroupBuffer()
        self.state = ckpt.LearnerState(run_id=run_id)
        self.trained: set[str] = set()
        self.inflight: dict[str, asyncio.Future] = {}  # groups of the step now running
        self.restore_notes: list[str] = []  # what a restore skipped or lost (the service reports them)
        self.model = self.trainer = None
        self.ckpt_dir = Path(cfg.checkpoint.dir or treegrpo_home() / "learner" / run_id).expanduser()
        self.publisher = Publisher(
            bus,
            producer,
            cfg.publish.sampler_endpoints,
            cfg.publish.expect_loaded,
            cfg.publish.push_timeout_s,
            cfg.publish.loaded_timeout_s,
            cfg.publish.push_attempts,
        )
        self.model_path = (
            str(Path(cfg.model).expanduser()) if cfg.model else str(treegrpo_home() / "models" / "small")
        )
        self.saver = BackgroundSave(self.ckpt_dir, cfg.checkpoint.keep, tracer)
        self.need = cfg.step.groups_per_step or len(spec.tasks) * spec.tree.expansions
        self.sync = spec.max_staleness == 0

    # ---- opening and restoring -----------------------------------------------------------------
    async def open(self) -> None:
        co = self.cfg.colocate
        _colocate.check_reachable(self.cfg.device, co.engine_gib, 0.0)  # waits that could never end stop here
        await _colocate.wait_for_engine(self.cfg.device, co.engine_gib, co.settle_s, co.wait_timeout_s)
        await asyncio.to_thread(self._build)
        _colocate.check_reachable(self.cfg.device, 0.0, co.min_free_gib)
        restorer = Restorer(self.bus, self.run_id, self.producer, self.trainer, self.ckpt_dir)
        restored = await restorer.restore()  # CheckpointError: nothing can rebuild the state
        self.adopt(restored.state)
        for k, rec in enumerate(restored.retrain, 1):
            log.warning(
                "re-training recorded step %d (%d/%d) from the log", rec.step, k, len(restored.retrain)
            )
            await self.retrain(await restorer.batch(rec), rec)
        if restored.fact is not None:
            self.restore_notes = restored.notes
            await restorer.record(restored.fact)
            if restored.needs_checkpoint:
                await self._checkpoint_restored()
        await restorer.finish_tail(self.state, restored, self.upload, self.publisher)
        log.info(
            "learner for run %s at version %d (%d groups consumed)",
            self.run_id,
            self.state.step,
            len(self.trained),
        )

    async def retrain(self, batch: Batch, rec: pb.LearnerStepped) -> None:
        """Re-train a recorded step from its groups in the log (no weights of it verified)."""
        await self.train(self.samples(batch).samples)
        self.advance(batch)
        self.state.last_stream_seq = max(self.state.last_stream_seq, rec.last_stream_seq)
        self.state.record = MessageToDict(rec, preserving_proto_field_name=True)

    async def _checkpoint_restored(self) -> None:
        try:  # a good checkpoint now: the next restart needs no rebuild
            await asyncio.to_thread(lambda: self.save_checkpoint(self.trainer.export(), self.trainer.state()))
        except (OSError, ckpt.NonFiniteWeights) as exc:  # a cache: the next step's save tries again
            log.warning("could not checkpoint the restored state: %s", exc)

    def _build(self) -> None:
        import torch

        # N ranks, sharded; rank 0 runs here (services/learner/treegrpo_learner/_ranks.py)
        if len(self.cfg.devices) > 1:
            from treegrpo_learner._ranks import RankedTrainer, RankSpec

            self.trainer = RankedTrainer(RankSpec.from_config(self.cfg, self.model_path))
            self.model = self.trainer.model
            return
        if self.cfg.torch_threads:
            torch.set_num_threads(self.cfg.torch_threads)
        torch.manual_seed(self.cfg.seed)
        device = self.cfg.devices[0] if self.cfg.devices else self.cfg.device
        base = load_base(self.model_path, self.cfg.dtype, device)
        if self.cfg.packing.gradient_checkpointing:
            base.train()  # transformers checkpoints layers only in training mode
            base.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        self.model = wrap_lora(base, self.cfg.lora)
        self.trainer = PolicyTrainer(
            self.model, replace(TrainerSettings.from_config(self.cfg), device=device)
        )

    def adopt(self, state: ckpt.LearnerState) -> None:
        self.state = state
        self.trained = set(state.trained)

    # ---- members -------------------------------------------------------------------------------
    async def members(self, gs: pb.GroupScored) -> list[Member]:
        return await read_members(self.bus, self.run_id, gs)  # one request for the whole group

    # ---- the step ------------------------------------------------------------------------------
    def consumed_in_round(self, round_: int) -> int:
        """How many of a round's groups (ids are deterministic) were already trained or dropped."""
        ids = {
            events.group_id(self.run_id, t, round_, s)
            for t in self.spec.tasks
            for s in range(self.spec.tree.expansions)
        }
        return len(ids & self.trained)

    def drop_stale(self, batch: Batch) -> None:
        for g in batch.stale:
            log.warning(
                "dropping group %s (task %s round %d): sampled with v%d, learner at v%d, max_staleness=%d",
                *(g.group, g.task, g.round, g.policy_version, self.state.step, self.spec.max_staleness),
            )
            self.trained.add(g.group)
            self.state.dropped_stale += 1
            self.state.last_stream_seq = max(self.state.last_stream_seq, g.stream_seq)
            if not g.done.done():
                g.done.set_result(False)

    def samples(self, batch: Batch) -> BatchSamples:
        """The batch's training samples, its groups with signal, their staleness, and what was left
        out and why (the step's metrics)."""
        return batch_samples(batch, self.cfg, self.spec, self.state.step)

    async def step(self, batch: Batch, waited_s: float, dropped: int) -> pb.LearnerStepped:
        self.inflight = {g.group: g.done for g in batch.groups}
        try:
            return await self._step(batch, waited_s, dropped)
        finally:
            self.inflight = {}

    async def _step(self, batch: Batch, waited_s: float, dropped: int) -> pb.LearnerStepped:
        t0 = time.perf_counter()
        wall0 = time.time_ns()
        with self.tracer.start_as_current_span(
            "learner.step",
            context=step_context(batch),
            links=[trace.Link(g.span) for g in batch.groups if g.span],
        ) as span:
            span.set_attribute("treegrpo.run_id", self.run_id)
            phases, metrics = {"gen": waited_s}, {}
            with self.tracer.start_as_current_span("adv"):
                ta = time.perf_counter()
                got = self.samples(batch)
                phases["adv"] = time.perf_counter() - ta
            co = self.cfg.colocate
            phases["sleep"] = await _colocate.wait_for_memory(
                self.cfg.device, co.min_free_gib, co.wait_timeout_s
            )
            settled = await self.saver.settle()  # the last step's checkpoint: done, in a synchronous run
            out = await self.train(got.samples)
            pad = max(0.0, self.cfg.step.min_seconds - (time.perf_counter() - t0))
            if pad:
                await asyncio.sleep(pad)
                out.phases["update_actor"] += pad
            phase_spans(self.tracer, out.phases, time.time_ns() - int(sum(out.phases.values()) * 1e9))
            phases.update(out.phases)
            metrics.update(out.metrics)
            metrics.update(got.counts)
            metrics.update(settled.metrics())
            self.advance(batch)
            adapter = await asyncio.to_thread(self.trainer.export)  # gathered once: checkpoint and push
            if co.release_after_step:
                await asyncio.to_thread(_colocate.release, self.cfg.device)
            record = step_record(batch, self.state, phases, metrics, got, dropped)
            if settled.waited_s >= 0.001:
                record.phases_s.save_checkpoint = settled.waited_s
            # the published tar and the checkpoint keep this record to re-send after a crash between
            # publishing and recording: its total must match its phases
            record.total_s = waited_s + (time.perf_counter() - t0)
            self.state.record = MessageToDict(record, preserving_proto_field_name=True)
            due = self.state.step % self.cfg.checkpoint.every == 0
            # captured now, as the save before the push would: the RNG right after the step
            trainer_state = await asyncio.to_thread(self.trainer.state) if due else None
            if due and not self.cfg.checkpoint.background:
                await self._save_on_path(record, adapter, trainer_state, t0 - waited_s)
            with self.tracer.start_as_current_span("update_weights"):
                tu = time.perf_counter()
                archive = await self.archive(adapter)
                record.metrics["archive_s"] = time.perf_counter() - tu
                got = await self.publisher.publish(self.run_id, self.state.step, archive, self.model_path)
                record.metrics.update(got)
                # a colocated engine's wake is its own phase, not the weights' transfer and load: the
                # part the load waited for (sampler_wake_s keeps the whole wake)
                wake = record.metrics.get("sampler_wake_waited_s", 0.0)
                record.phases_s.update_weights = time.perf_counter() - tu - wake
                if wake:
                    record.phases_s.wake = wake
            record.total_s = waited_s + (time.perf_counter() - t0)
            span.set_attribute("treegrpo.policy_version", self.state.step)
            # inside the step's span: the fact's traceparent is this step's (one trace, not a new root)
            await self.bus.publish(events.make_event(self.run_id, self.producer, record, at=wall0 / 1e9))
            if due and self.cfg.checkpoint.background:  # after the confirmed load, beside the next round
                self.state.record = MessageToDict(record, preserving_proto_field_name=True)  # sent: whole
                self.saver.begin(self.state, adapter, trainer_state)
        for g in batch.groups:
            if not g.done.done():
                g.done.set_result(True)
        return record

    async def train(self, samples: list[TrainSample]) -> StepOutput:
        """The next step's update; a numeric fault (overflow, NaN, inf) is `NonFiniteStep`, permanent."""
        _colocate.start_peak(self.cfg.device)
        try:
            out = await asyncio.to_thread(self.trainer.step, samples)
        except Exception as exc:
            cause = numeric_fault(exc)
            if cause:
                raise step_fault(self.state.step + 1, cause) from exc
            raise
        if (peak := _colocate.peak_gib(self.cfg.device)) is not None:
            out.metrics["device_peak_gib"] = peak  # what a memory plan leaves the learner
        await asyncio.to_thread(check_finite, self.state.step + 1, out.metrics, self.model)
        return out

    def advance(self, batch: Batch) -> None:
        self.state.step += 1
        for g in batch.groups:
            self.trained.add(g.group)
            self.state.last_stream_seq = max(self.state.last_stream_seq, g.stream_seq)
        self.state.trained = sorted(self.trained)

    async def _save_on_path(self, record: pb.LearnerStepped, adapter, trainer_state, start: float) -> None:
        """The step's checkpoint before its push, not beside it: beside (the announcement waiting for
        it) the save took 3.2 s instead of 2.2 on the 9B, the upload, push and unpack writing the same
        disk (one H100, 2026-12-07). The record then grows by the save (`start`: when the step's time
        began)."""
        with self.tracer.start_as_current_span("save_checkpoint"):
            ts = time.perf_counter()
            await asyncio.to_thread(self.save_checkpoint, adapter, trainer_state)
            record.phases_s.save_checkpoint = time.perf_counter() - ts
            record.total_s = time.perf_counter() - start
            self.state.record = MessageToDict(record, preserving_proto_field_name=True)

    def save_checkpoint(self, adapter, trainer_state: dict) -> None:
        ckpt.save(self.ckpt_dir, self.state, adapter, trainer_state, self.cfg.checkpoint.keep)

    async def archive(self, adapter=None) -> Archive:
        """This version's adapter archive in the outbox, the older ones removed."""
        extra = {"state": asdict(self.state)}
        if adapter is None:
            adapter = await asyncio.to_thread(self.trainer.export)
        dtype = self.cfg.dtype if self.cfg.publish.dtype == "auto" else self.cfg.publish.dtype
        outbox = self.ckpt_dir / "outbox"
        return await asyncio.to_thread(write_version, adapter, extra, outbox, self.state.step, dtype)

    async def upload(self, adapter=None) -> Published:
        """This version archived, stored and announced (no push: a restart's unfinished version)."""
        archive = await self.archive(adapter)
        return await self.publisher.upload(self.run_id, self.state.step, archive.path, self.model_path)

    async def close(self) -> None:
        """Let go of the run: its checkpoint being written first, then the model (`shutdown`)."""
        await self.saver.settle()
        await asyncio.to_thread(self.shutdown)

    def shutdown(self) -> None:
        """Stop the ranks of a sharded learner and let go of the model, so its device memory can be
        returned while this object is still referenced (a reopen); the durable state stays."""
        if hasattr(self.trainer, "close"):
            self.trainer.close()
        self.model = self.trainer = None
