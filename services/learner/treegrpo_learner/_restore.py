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
"""

from __future__ import annotations

import asyncio
import logging
import tarfile
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

from google.protobuf.json_format import MessageToDict, ParseDict
from nats.js.errors import BadObjectMetaError, DigestMismatchError, NotFoundError

from treegrpo import events as ev_mod
from treegrpo.bus import ADAPTERS, TransientError, file_sha256
from treegrpo.events import Kind
from treegrpo.finite import nonfinite_in_folder
from treegrpo.v1 import events_pb2 as pb
from treegrpo_learner import _checkpoint as ckpt
from treegrpo_learner._buffer import Batch, Member, PendingGroup
from treegrpo_learner._publish import Published, read_archive

if TYPE_CHECKING:
    from treegrpo_learner._run_learner import RunLearner

log = logging.getLogger(__name__)


async def restore(run: RunLearner) -> pb.LearnerRestored | None:
    """Bring `run` to its newest recorded version; the fact that says how (None: a fresh run)."""
    fact = pb.LearnerRestored()
    path, damaged = await asyncio.to_thread(ckpt.newest_good, run.ckpt_dir)
    fact.skipped.extend(damaged)
    moments_at = -1  # the step whose AdamW moments the trainer holds (-1: fresh ones)
    if path is not None:
        await _load_checkpoint(run, path)
        fact.weights_from, fact.checkpoint, moments_at = "checkpoint", path.name, run.state.step
    published = await _published(run)
    for pub in sorted(published.values(), key=lambda p: -p.version):
        if pub.version <= run.state.step:
            break
        why, narrow = await _adopt_published(run, pub)
        if why:
            fact.skipped.append(why)
            continue
        fact.weights_from, fact.adapter_version = "published", pub.version
        fact.adapter_key, fact.adapter_sha256 = pub.adapter_key, pub.sha256
        fact.lost.append(_moments_lost(pub.version, moments_at))
        if narrow:
            fact.lost.append(f"float32 precision: version {pub.version} was published in 16 bits")
        break
    start = run.state.step
    fact.replayed_steps = await replay(run, await _recorded_steps(run))
    if fact.replayed_steps:
        fact.weights_from = fact.weights_from or "replay"
        fact.lost.append(
            f"versions {start + 1}..{run.state.step} were re-trained from the log: their weights are "
            "recomputed, not the published bytes; groups dropped as stale are not in the log"
        )
    run.damaged_versions = {v for v in published if any(s.startswith(f"v{v}:") for s in fact.skipped)}
    fact.version = run.state.step
    if not fact.weights_from and not fact.skipped:
        return None  # nothing trained yet: a fresh start
    if fact.skipped and not fact.weights_from:
        fact.weights_from = "base"  # only damaged copies of a run that never stepped
    return fact


async def _load_checkpoint(run: RunLearner, path: Path) -> None:
    state, trainer_state, adapter = ckpt.load(path)
    if state.run_id and state.run_id != run.run_id:
        # a checkpoint_dir shared by runs: adopting it would start this run from another run's
        # weights, and pruning would delete that run's checkpoints
        raise ckpt.CheckpointError(
            f"{run.ckpt_dir} holds run {state.run_id!r}'s checkpoints, not {run.run_id!r}'s: "
            "leave learner.checkpoint_dir empty (one folder per run) or give each run its own"
        )
    await asyncio.to_thread(run.trainer.load_adapter, adapter)
    run.trainer.load_state(trainer_state)
    run.adopt(state)


def _moments_lost(version: int, moments_at: int) -> str:
    if moments_at < 0:
        return f"optimizer state (AdamW moments, RNG): reset at version {version}"
    return f"AdamW moments of steps {moments_at + 1}..{version}: they are step {moments_at}'s"


async def _published(run: RunLearner) -> dict[int, pb.PolicyPublished]:
    out: dict[int, pb.PolicyPublished] = {}
    async for _seq, event in run.bus.replay(run.run_id, kinds=[Kind.POLICY_PUBLISHED]):
        out[event.policy_published.version] = event.policy_published
    return out


async def _adopt_published(run: RunLearner, pub: pb.PolicyPublished) -> tuple[str, bool]:
    """('', published in 16 bits) once the adapter of `pub` is loaded; (why, _) when it does not
    verify. Only a verified adapter is loaded, so a rejected one leaves the weights as they were."""
    with tempfile.TemporaryDirectory() as tmp:
        archive, folder = Path(tmp) / "v.tar", Path(tmp) / "adapter"
        try:
            await run.bus.get_object(ADAPTERS, pub.adapter_key, archive)
        except NotFoundError:
            return f"v{pub.version}: {pub.adapter_key} is not in the {ADAPTERS} bucket", False
        except (DigestMismatchError, BadObjectMetaError) as exc:
            return f"v{pub.version}: {pub.adapter_key} is damaged in the store ({type(exc).__name__})", False
        sha = await asyncio.to_thread(file_sha256, archive)
        if sha != pub.sha256:
            return (
                f"v{pub.version}: {pub.adapter_key} hashes to {sha[:12]}…, its policy.published "
                f"recorded {pub.sha256[:12]}…"
            ), False
        why, extra, narrow = await asyncio.to_thread(_check_archive, archive, folder, run.run_id, pub.version)
        if why:
            return why, False
        await asyncio.to_thread(run.trainer.load_adapter, folder)
    run.adopt(ckpt.LearnerState(**extra["state"]))
    return "", narrow


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


async def _recorded_steps(run: RunLearner) -> dict[int, pb.LearnerStepped]:
    out: dict[int, pb.LearnerStepped] = {}
    async for _seq, event in run.bus.replay(run.run_id, kinds=[Kind.LEARNER_STEPPED]):
        out[event.learner_stepped.step] = event.learner_stepped
    return out


async def replay(run: RunLearner, steps: dict[int, pb.LearnerStepped]) -> int:
    """Re-train the recorded steps after the current one, in order, from their groups in the log."""
    todo = [n for n in sorted(steps) if n > run.state.step]
    for k, n in enumerate(todo, 1):
        if n != run.state.step + 1:
            raise ckpt.CheckpointError(
                f"cannot rebuild version {n}: the log has no learner.step {run.state.step + 1} "
                "and no checkpoint or published adapter of it verifies"
            )
        rec = steps[n]
        log.warning("re-training recorded step %d (%d/%d) from the log", n, k, len(todo))
        batch = Batch([await _recorded_group(run, n, g) for g in rec.sibling_groups])
        samples, _, _ = run.samples(batch)
        await run.train(samples)
        run.advance(batch)
        run.state.last_stream_seq = max(run.state.last_stream_seq, rec.last_stream_seq)
        run.state.record = MessageToDict(rec, preserving_proto_field_name=True)
    return len(todo)


async def _recorded_group(run: RunLearner, step: int, group: str) -> PendingGroup:
    event = await run.bus.last_event(run.run_id, Kind.GROUP_SCORED, group)
    gone = f"cannot rebuild version {step}: no checkpoint or published adapter of it verifies, and"
    if event is None:
        raise ckpt.CheckpointError(f"{gone} the group.scored of its group {group} is gone from the log")
    gs = event.group_scored
    try:
        members: list[Member] = await run.members(gs)
    except TransientError as exc:  # a fact of a step already trained is not late: it is gone
        why = f"{gone} a node.sampled of its group {group} is gone from the log"
        raise ckpt.CheckpointError(why) from exc
    done = asyncio.get_running_loop().create_future()
    return PendingGroup(group, gs.task, gs.round, gs.step, 0, members, done)


async def record(run: RunLearner, fact: pb.LearnerRestored) -> None:
    """Publish the fact, and re-write the cache when it was not a clean checkpoint restore."""
    before = [e async for _s, e in run.bus.replay(run.run_id, kinds=[Kind.LEARNER_RESTORED])]
    fact.restore = len(before) + 1
    await run.bus.publish(ev_mod.make_event(run.run_id, run.producer, fact))
    if fact.skipped or fact.lost:
        (log.warning if fact.lost else log.info)("%s", ev_mod.describe_restored(fact))
    if fact.version and (fact.weights_from != "checkpoint" or fact.replayed_steps or fact.skipped):
        try:  # a good checkpoint now: the next restart needs no rebuild
            await asyncio.to_thread(lambda: run.save_checkpoint(run.trainer.export()))
        except (OSError, ckpt.NonFiniteWeights) as exc:  # a cache: the next step's save tries again
            log.warning("could not checkpoint the restored state: %s", exc)


async def finish_tail(run: RunLearner) -> None:
    """A crash between a step's checkpoint and its last event: publish what is missing."""
    v = run.state.step
    if v == 0 or await run.bus.last_event(run.run_id, Kind.LEARNER_STEPPED, str(v)) is not None:
        return
    log.warning("completing version %d after a restart", v)
    record = (
        ParseDict(run.state.record, pb.LearnerStepped())
        if run.state.record
        else pb.LearnerStepped(step=v, policy_version=v, last_stream_seq=run.state.last_stream_seq)
    )
    started = time.perf_counter()
    pub = await run.bus.last_event(run.run_id, Kind.POLICY_PUBLISHED, str(v))
    if pub is None or v in run.damaged_versions:  # not stored, or stored damaged: upload it again
        published = await run.upload()
    else:
        published = await _download_published(run, pub.policy_published)
    await run.publisher.deliver(run.run_id, published)
    record.phases_s.update_weights = time.perf_counter() - started
    record.total_s += record.phases_s.update_weights  # the re-sent step's phases still sum to its total
    await run.bus.publish(ev_mod.make_event(run.run_id, run.producer, record))


async def _download_published(run: RunLearner, pub: pb.PolicyPublished) -> Published:
    dest = run.ckpt_dir / "outbox" / f"v{pub.version}.tar"
    await run.bus.get_object(ADAPTERS, pub.adapter_key, dest)
    return Published(pub.version, pub.adapter_key, pub.sha256, pub.bytes, dest)
