"""Restoring a run's learner state when it (re)opens: checkpoints are a cache of the log.

The state is rebuilt from the newest point that verifies, then the recorded steps after it:
1. the newest local checkpoint that verifies (weights, AdamW moments, RNG, `LearnerState`);
2. a newer published adapter, or with no good checkpoint the newest one, whose bytes hash to the
   sha256 its `policy.published` recorded and whose values are finite: weights and the state in
   its tar (the optimizer starts afresh there: published adapters carry no moments);
3. every `learner.step` recorded after that point, re-trained in order from the groups it names
   (their `group.scored` and `node.sampled` facts are the training data), from the base weights
   when nothing else verifies.
Only a recorded step whose facts are gone from the log stops the learner (`CheckpointError`,
permanent). Each restore of a trained run is one `learner.restored` fact: where the weights came
from, what was skipped and why, and what the restored state lacks.

Restoring is a value: a `Restorer` reads the run's log once (its `policy.published`, `learner.step`
and `learner.restored` facts: one replay), loads the newest weights that verify into the trainer,
and returns `Restored`: the state those weights belong to, the recorded steps to re-train after it,
the fact, and the published versions it found damaged. `RunLearner.open` applies it.
"""

from __future__ import annotations

import asyncio
import logging
import tarfile
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

from google.protobuf.json_format import ParseDict

from treegrpo import events
from treegrpo.bus import ADAPTERS, Bus, ObjectDamaged, ObjectMissing, TransientError, file_sha256
from treegrpo.events import Kind
from treegrpo.finite import nonfinite_in_folder
from treegrpo.v1 import events_pb2 as pb
from treegrpo_learner import _checkpoint as ckpt
from treegrpo_learner._archive import read_archive
from treegrpo_learner._buffer import Batch, PendingGroup, read_members
from treegrpo_learner._publish import Published, Publisher

log = logging.getLogger(__name__)

LOG_KINDS = (Kind.POLICY_PUBLISHED, Kind.LEARNER_STEPPED, Kind.LEARNER_RESTORED)


@dataclass
class RunLog:
    """What a restore needs of the run's log, read in one replay."""

    published: dict[int, pb.PolicyPublished] = field(default_factory=dict)
    steps: dict[int, pb.LearnerStepped] = field(default_factory=dict)
    restores: int = 0  # learner.restored facts so far

    @classmethod
    async def read(cls, bus: Bus, run_id: str) -> RunLog:
        out = cls()
        async for _seq, event in bus.replay(run_id, kinds=LOG_KINDS):
            kind = events.kind_of(event)
            if kind == Kind.POLICY_PUBLISHED:
                out.published[event.policy_published.version] = event.policy_published
            elif kind == Kind.LEARNER_STEPPED:
                out.steps[event.learner_stepped.step] = event.learner_stepped
            else:
                out.restores += 1
        return out


@dataclass
class Restored:
    """Where a restore left the trainer: its weights are `state`'s; `retrain` are the recorded
    steps after it, in order, to re-train from the log."""

    state: ckpt.LearnerState
    fact: pb.LearnerRestored | None  # None: nothing trained yet, a fresh start
    damaged: set[int]  # published versions whose adapter did not verify (a tail re-uploads them)
    retrain: list[pb.LearnerStepped]
    log: RunLog

    @property
    def notes(self) -> list[str]:
        """What the restore skipped or lost, for the service's heartbeat."""
        if self.fact is None:
            return []
        return [f"skipped on restore: {why}" for why in self.fact.skipped] + [
            f"lost on restore: {what}" for what in self.fact.lost
        ]

    @property
    def needs_checkpoint(self) -> bool:
        """The local checkpoint is not what was restored: save one, so the next restart rebuilds nothing."""
        f = self.fact
        return bool(f and f.version and (f.weights_from != "checkpoint" or f.replayed_steps or f.skipped))


class Restorer:
    """Brings a run's trainer to the newest weights that verify; see the module's docstring."""

    def __init__(self, bus: Bus, run_id: str, producer: str, trainer, checkpoints: Path):
        self.bus, self.run_id, self.producer = bus, run_id, producer
        self.trainer, self.checkpoints = trainer, checkpoints

    async def restore(self) -> Restored:
        """Load the newest weights that verify; CheckpointError when the recorded steps cannot be
        rebuilt from there."""
        fact, state = pb.LearnerRestored(), ckpt.LearnerState(run_id=self.run_id)
        path, damaged = await asyncio.to_thread(ckpt.newest_good, self.checkpoints)
        fact.skipped.extend(damaged)
        moments_at = -1  # the step whose AdamW moments the trainer holds (-1: fresh ones)
        if path is not None:
            state = await self._load_checkpoint(path)
            fact.weights_from, fact.checkpoint, moments_at = "checkpoint", path.name, state.step
        run_log = await RunLog.read(self.bus, self.run_id)
        for pub in sorted(run_log.published.values(), key=lambda p: -p.version):
            if pub.version <= state.step:
                break
            why, adopted, narrow = await self._adopt_published(pub)
            if why:
                fact.skipped.append(why)
                continue
            state = adopted
            fact.weights_from, fact.adapter_version = "published", pub.version
            fact.adapter_key, fact.adapter_sha256 = pub.adapter_key, pub.sha256
            fact.lost.append(_moments_lost(pub.version, moments_at))
            if narrow:
                fact.lost.append(f"float32 precision: version {pub.version} was published in 16 bits")
            break
        retrain = _steps_after(state.step, run_log.steps)
        fact.replayed_steps = len(retrain)
        fact.version = retrain[-1].step if retrain else state.step
        if retrain:
            fact.weights_from = fact.weights_from or "replay"
            fact.lost.append(
                f"versions {state.step + 1}..{fact.version} were re-trained from the log: their weights "
                "are recomputed, not the published bytes; groups dropped as stale are not in the log"
            )
        bad = {v for v in run_log.published if any(s.startswith(f"v{v}:") for s in fact.skipped)}
        if not fact.weights_from and not fact.skipped:
            return Restored(state, None, bad, retrain, run_log)  # nothing trained yet: a fresh start
        if fact.skipped and not fact.weights_from:
            fact.weights_from = "base"  # only damaged copies of a run that never stepped
        fact.restore = run_log.restores + 1
        return Restored(state, fact, bad, retrain, run_log)

    async def _load_checkpoint(self, path: Path) -> ckpt.LearnerState:
        state, trainer_state, adapter = ckpt.load(path)
        if state.run_id and state.run_id != self.run_id:
            # a checkpoint_dir shared by runs: adopting it would start this run from another run's
            # weights, and pruning would delete that run's checkpoints
            raise ckpt.CheckpointError(
                f"{self.checkpoints} holds run {state.run_id!r}'s checkpoints, not {self.run_id!r}'s: "
                "leave learner.checkpoint.dir empty (one folder per run) or give each run its own"
            )
        await asyncio.to_thread(self.trainer.load_adapter, adapter)
        self.trainer.load_state(trainer_state)
        return state

    async def _adopt_published(self, pub: pb.PolicyPublished) -> tuple[str, ckpt.LearnerState | None, bool]:
        """('', its state, published in 16 bits) once the adapter of `pub` is loaded; (why, None, _)
        when it does not verify. Only a verified adapter is loaded: a rejected one changes nothing."""
        with tempfile.TemporaryDirectory() as tmp:
            archive, folder = Path(tmp) / "v.tar", Path(tmp) / "adapter"
            try:
                await self.bus.get_object(ADAPTERS, pub.adapter_key, archive)
            except (ObjectMissing, ObjectDamaged) as exc:
                return f"v{pub.version}: {exc}", None, False
            sha = await asyncio.to_thread(file_sha256, archive)
            if sha != pub.sha256:
                return (
                    (
                        f"v{pub.version}: {pub.adapter_key} hashes to {sha[:12]}…, its policy.published "
                        f"recorded {pub.sha256[:12]}…"
                    ),
                    None,
                    False,
                )
            why, extra, narrow = await asyncio.to_thread(
                _check_archive, archive, folder, self.run_id, pub.version
            )
            if why:
                return why, None, False
            await asyncio.to_thread(self.trainer.load_adapter, folder)
        return "", ckpt.LearnerState(**extra["state"]), narrow

    async def batch(self, rec: pb.LearnerStepped) -> Batch:
        """A recorded step's groups, read back from their `group.scored` and `node.sampled` facts."""
        return Batch([await self._recorded_group(rec.step, g) for g in rec.sibling_groups])

    async def _recorded_group(self, step: int, group: str) -> PendingGroup:
        event = await self.bus.last_event(self.run_id, Kind.GROUP_SCORED, group)
        gone = f"cannot rebuild version {step}: no checkpoint or published adapter of it verifies, and"
        if event is None:
            raise ckpt.CheckpointError(f"{gone} the group.scored of its group {group} is gone from the log")
        gs = event.group_scored
        try:
            members = await read_members(self.bus, self.run_id, gs)
        except TransientError as exc:  # a fact of a step already trained is not late: it is gone
            why = f"{gone} a node.sampled of its group {group} is gone from the log"
            raise ckpt.CheckpointError(why) from exc
        done = asyncio.get_running_loop().create_future()
        return PendingGroup(group, gs.task, gs.round, gs.step, 0, members, done)

    async def record(self, fact: pb.LearnerRestored) -> None:
        """Publish the fact (its `restore` number counted from the log the restore read)."""
        await self.bus.publish(events.make_event(self.run_id, self.producer, fact))
        if fact.skipped or fact.lost:
            (log.warning if fact.lost else log.info)("%s", events.describe_restored(fact))

    async def finish_tail(
        self,
        state: ckpt.LearnerState,
        restored: Restored,
        upload: Callable[[], Awaitable[Published]],
        publisher: Publisher,
    ) -> None:
        """A crash between a step's checkpoint and its last event: publish what is missing (from
        the log the restore read: no learner.step of this run was recorded since)."""
        v = state.step
        if v == 0 or v in restored.log.steps:
            return
        log.warning("completing version %d after a restart", v)
        record = (
            ParseDict(state.record, pb.LearnerStepped())
            if state.record
            else pb.LearnerStepped(step=v, policy_version=v, last_stream_seq=state.last_stream_seq)
        )
        started = time.perf_counter()
        pub = restored.log.published.get(v)
        if pub is None or v in restored.damaged:  # not stored, or stored damaged: upload it again
            published = await upload()
        else:
            dest = self.checkpoints / "outbox" / f"v{pub.version}.tar"
            await self.bus.get_object(ADAPTERS, pub.adapter_key, dest)
            published = Published(pub.version, pub.adapter_key, pub.sha256, pub.bytes, dest)
        await publisher.deliver(self.run_id, published)
        record.phases_s.update_weights = time.perf_counter() - started
        record.total_s += record.phases_s.update_weights  # the re-sent step's phases still sum to its total
        await self.bus.publish(events.make_event(self.run_id, self.producer, record))


def _moments_lost(version: int, moments_at: int) -> str:
    if moments_at < 0:
        return f"optimizer state (AdamW moments, RNG): reset at version {version}"
    return f"AdamW moments of steps {moments_at + 1}..{version}: they are step {moments_at}'s"


def _steps_after(step: int, steps: dict[int, pb.LearnerStepped]) -> list[pb.LearnerStepped]:
    """The recorded steps after `step`, in order; CheckpointError at the first one missing."""
    todo = [n for n in sorted(steps) if n > step]
    for k, n in enumerate(todo, 1):
        if n != step + k:
            raise ckpt.CheckpointError(
                f"cannot rebuild version {n}: the log has no learner.step {step + k} "
                "and no checkpoint or published adapter of it verifies"
            )
    return [steps[n] for n in todo]


def _check_archive(archive: Path, folder: Path, run_id: str, version: int) -> tuple[str, dict, bool]:
    """(why it cannot be used, '' if it can; the tar's state; its weights narrower than float32)."""
    from safetensors.torch import load_file

    try:
        extra = read_archive(archive, folder)
        state = extra["state"]
        bad = nonfinite_in_folder(folder)
        weights = load_file(str(folder / "adapter_model.safetensors"))
    except (OSError, ValueError, KeyError, tarfile.TarError) as exc:
        return f"v{version}: the adapter tar does not read: {type(exc).__name__}: {exc}", {}, False
    if bad:
        return f"v{version}: the adapter holds {sum(bad.values())} non-finite values", {}, False
    if state.get("run_id") not in ("", run_id) or state.get("step") != version:
        return f"v{version}: its state is run {state.get('run_id')!r} step {state.get('step')}", {}, False
    return "", extra, any(t.is_floating_point() and t.element_size() < 4 for t in weights.values())
