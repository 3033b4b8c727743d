"""A batch's groups turned into the step's training samples: advantages per group, then per member
what trains and what is left out (and why, counted for the step's metrics)."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from treegrpo import advantages
from treegrpo.config import RunSpec
from treegrpo_learner import _respend
from treegrpo_learner._buffer import Batch, PendingGroup
from treegrpo_learner._numeric import check_advantage, step_fault
from treegrpo_learner._trainer import TrainSample
from treegrpo_learner.config import LearnerConfig

log = logging.getLogger(__name__)


@dataclass
class BatchSamples:
    """What trains, how many groups carried signal, each group's staleness, and what was left out."""

    samples: list[TrainSample] = field(default_factory=list)
    with_signal: int = 0
    staleness: list[int] = field(default_factory=list)
    counts: dict[str, float] = field(default_factory=dict)


def batch_samples(batch: Batch, cfg: LearnerConfig, spec: RunSpec, step: int) -> BatchSamples:
    """The samples of a step the learner at version `step` takes next (step + 1)."""
    over = cfg.overlong
    penalty = over.penalty if over.mode == "penalty" else None
    out = BatchSamples(counts={"sequences_overlong": 0.0, **_respend.counters(spec)})
    if over.mode == "mask":
        out.counts["sequences_overlong_masked"] = 0.0
    for g in batch.groups:
        try:
            adv = g.advantages(cfg.estimator, penalty)
        except ValueError as exc:  # a non-finite reward: this group fails the same way every time
            raise step_fault(step + 1, f"group {g.group}: {exc}") from exc
        out.with_signal += any(a != 0.0 for a in adv)
        out.staleness.append(step - g.policy_version)
        if _respend.skips(spec, adv):  # re-spending on: no signal, no place in the step
            out.counts[_respend.SKIPPED] += 1
            continue
        if g.dropped:
            log.warning("group %s (task %s round %d) trains nothing: %s", g.group, g.task, g.round, g.dropped)
            continue
        _member_samples(g, adv, over.mode == "mask", step, out)
    return out


def _member_samples(
    g: PendingGroup, adv: list[float], mask_overlong: bool, step: int, out: BatchSamples
) -> None:
    for m, a in zip(g.members, adv, strict=True):
        if advantages.masked(m.status):
            continue  # no outcome of the policy's: our side failed it (treegrpo/fault_policy.py)
        if not m.prompt_ids or not m.response_ids:
            continue  # nothing to condition on or to train (the sampler recorded no tokens)
        out.counts["sequences_overlong"] += m.truncated
        if m.truncated and mask_overlong:
            out.counts["sequences_overlong_masked"] += 1
            continue  # cut mid-thought: its reward says little about its tokens (DAPO)
        check_advantage(step + 1, g.group, m.node_id, a)
        sample = TrainSample(
            g.group, m.node_id, m.prompt_ids, m.response_ids, m.behaviour_logprobs, a, step - m.policy_version
        )
        out.samples.append(sample)
