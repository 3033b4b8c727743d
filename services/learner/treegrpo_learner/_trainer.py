"""One GRPO/PPO step of the LoRA policy on a batch of samples: packing, forward passes, update.

Phases timed here (the seed's names): `old_log_prob` (proximal logprobs, skipped when one
optimizer step per batch makes them equal to the training forward's, detached), `ref` (the base
policy with the adapter disabled; only with a KL coefficient) and `update_actor`.
Samples with zero advantage contribute no gradient (without KL) and are not even forwarded, but
their tokens still count in the token-mean denominator, so the update equals training on all.
"""

from __future__ import annotations

import contextlib
import logging
import math
import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field

import torch
import torch.distributed as dist

from treegrpo_learner import _distributed as dd
from treegrpo_learner import _trainer_state as trainer_state
from treegrpo_learner._loss import LossSettings, micro_metrics, policy_loss, token_weights
from treegrpo_learner._model import PackedPolicy, adapter_disabled, keep_input_dtype
from treegrpo_learner._packing import MicroBatch, SeqSpec, mini_batches
from treegrpo_learner._settings import TrainerSettings

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TrainSample:
    group: str
    node_id: str
    prompt_ids: tuple[int, ...]
    response_ids: tuple[int, ...]
    behaviour_logprobs: tuple[float, ...]
    advantage: float
    staleness: int = 0


@dataclass
class StepOutput:
    metrics: dict[str, float]
    phases: dict[str, float] = field(default_factory=dict)


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


class PolicyTrainer:
    """One rank's step. Without `ranks` (one device, the default) nothing is sharded; with `ranks`
    the policy is FSDP2-sharded and every method is a collective that all ranks call in the same
    order (`treegrpo_learner._ranks` drives them)."""

    def __init__(self, model, cfg: TrainerSettings, ranks: dd.Ranks | None = None):
        if not isinstance(cfg, TrainerSettings):
            cfg = TrainerSettings.from_config(cfg)
        self.model, self.cfg, self.ranks = model, cfg, ranks
        self.device = ranks.device if ranks is not None else torch.device(cfg.device)
        self.world = ranks.world if ranks is not None else 1
        self._forwarded = 0  # tokens the current step's micro-batches ran through the model
        self.policy = PackedPolicy(model, cfg.gdn_backend)
        if ranks is not None:
            dd.shard(self.policy, self.policy.decoder, ranks)
        self.params = [p for p in model.parameters() if p.requires_grad]
        if not self.params:
            raise ValueError("the model has no trainable parameters (no adapter attached?)")
        fused = (
            self.device.type == "cuda" and ranks is None
        )  # sharded: the foreach path, DTensor's best-trodden
        self.opt = torch.optim.AdamW(
            self.params, lr=cfg.lr, betas=tuple(cfg.betas), weight_decay=cfg.weight_decay, fused=fused
        )
        self.loss = LossSettings.of(cfg)
        self.autocast = cfg.dtype == "bfloat16" and self.device.type == "cuda"
        self.budget = cfg.micro_batch_tokens
        if self.autocast:
            keep_input_dtype(model)

    # ---- forward -----------------------------------------------------------------------------
    def _amp(self):
        if self.autocast:
            return torch.autocast("cuda", dtype=torch.bfloat16)
        return contextlib.nullcontext()

    def forward(self, mb: MicroBatch) -> tuple[torch.Tensor, torch.Tensor]:
        """(logp, entropy) of every response token of a packed micro-batch, in row order."""
        with self._amp():
            return self.policy(
                mb.input_ids, mb.position_ids, mb.rows, mb.targets, self.cfg.logprob_chunk_tokens, mb.layout
            )

    def _share(
        self, seqs: Sequence[SeqSpec], indices: list[int]
    ) -> tuple[list[int], list[MicroBatch | None]]:
        return dd.micro_batches(seqs, indices, self.budget, self.cfg.share_prompts, self.ranks)

    def sync(self) -> None:
        """Phase boundary: this device's queue drained, and every rank got here."""
        _sync(self.device)
        if self.world > 1:
            dist.barrier(group=self.ranks.control)

    @contextlib.contextmanager
    def _mode(self, training: bool):
        """Train mode for the update, eval mode for scoring, whatever mode the model came in:
        transformers and peft enable dropout (and layer checkpointing) only in train mode."""
        was = self.model.training
        self.model.train(training)
        try:
            yield
        finally:
            self.model.train(was)

    @torch.no_grad()
    def logprobs(self, seqs: Sequence[SeqSpec], adapter: bool = True) -> list[torch.Tensor]:
        """Per-sequence response logprobs (CPU float32) under the policy, or the base without adapter."""
        out: list[torch.Tensor | None] = [None] * len(seqs)
        mine, mbs = self._share(seqs, list(range(len(seqs))))
        ctx = contextlib.nullcontext() if adapter else adapter_disabled(self.model)
        with ctx, self._mode(training=False):  # the policy's own distribution: no dropout
            for mb in mbs:
                logp, _ = self.forward((mb or dd.dummy()).to(self.device))
                for k, part in enumerate(torch.split(logp.float().cpu(), mb.response_lens) if mb else ()):
                    out[mine[mb.samples[k]]] = part
        if self.world > 1:  # every rank needs every sequence's values (its next share may differ)
            dd.share_values(out, mine, self.ranks)
        return out  # type: ignore[return-value]

    # ---- the step ----------------------------------------------------------------------------
    def _prepare(self, samples: Sequence[TrainSample]) -> list[TrainSample]:
        cap = self.cfg.max_response_tokens
        if not cap:
            return list(samples)
        return [
            TrainSample(
                s.group,
                s.node_id,
                s.prompt_ids,
                s.response_ids[:cap],
                s.behaviour_logprobs[:cap],
                s.advantage,
                s.staleness,
            )
            for s in samples
        ]

    def _active(self, samples: Sequence[TrainSample]) -> list[int]:
        return [
            i
            for i, s in enumerate(samples)
            if s.response_ids and (s.advantage != 0.0 or self.cfg.kl_coef > 0)
        ]

    def step(self, samples: Sequence[TrainSample]) -> StepOutput:
        samples = self._prepare(samples)
        seqs = [SeqSpec(s.prompt_ids, s.response_ids) for s in samples]
        active = self._active(samples)
        updates = self.cfg.ppo_epochs * self.cfg.mini_batches
        phases: dict[str, float] = {"old_log_prob": 0.0, "ref": 0.0}
        prox = ref = None
        if active and (self.cfg.recompute_proximal == "always" or updates > 1):
            t = time.perf_counter()
            prox = self._by_index(active, self.logprobs([seqs[i] for i in active]), len(samples))
            self.sync()
            phases["old_log_prob"] = time.perf_counter() - t
        if active and self.cfg.kl_coef > 0:
            t = time.perf_counter()
            ref = self._by_index(
                active, self.logprobs([seqs[i] for i in active], adapter=False), len(samples)
            )
            self.sync()
            phases["ref"] = time.perf_counter() - t
        t = time.perf_counter()
        self._forwarded = 0
        metrics = self._update(samples, seqs, active, prox, ref)
        self.sync()
        phases["update_actor"] = time.perf_counter() - t
        # what the update's forwards actually ran (shared prompts once per group, every epoch): the
        # throughput an MFU is counted from, comparable with benchmarks/learner_hybrid_gpu.py
        metrics["tokens_forwarded"] = float(self._forwarded)
        metrics["update_tokens_per_s"] = self._forwarded / max(phases["update_actor"], 1e-9)
        tokens = sum(len(s.response_ids) for s in samples)
        metrics["tokens"] = float(tokens)
        metrics["tokens_trained"] = float(
            sum(len(samples[i].response_ids) + len(samples[i].prompt_ids) for i in active)
        )
        metrics["sequences"] = float(len(samples))
        metrics["sequences_trained"] = float(len(active))
        log.info(
            "step: %d of %d sequences trained, %d tokens forwarded in %.1f s (%.0f tok/s)",
            len(active),
            len(samples),
            self._forwarded,
            phases["update_actor"],
            metrics["update_tokens_per_s"],
        )
        return StepOutput(metrics=metrics, phases=phases)

    @staticmethod
    def _by_index(active: list[int], values: list[torch.Tensor], n: int) -> list[torch.Tensor | None]:
        out: list[torch.Tensor | None] = [None] * n
        for i, v in zip(active, values, strict=True):
            out[i] = v
        return out

    def _update(self, samples, seqs, active, prox, ref) -> dict[str, float]:
        acc: dict[str, list[float]] = defaultdict(list)
        chunks = mini_batches(list(range(len(samples))), self.cfg.mini_batches)
        with self._mode(training=True):  # LoRA dropout (if set) and gradient checkpointing act here
            for _epoch in range(self.cfg.ppo_epochs):
                for members in chunks:
                    self._optimizer_step(samples, seqs, members, set(active), prox, ref, acc)
        if self.world > 1:  # each rank saw its own micro-batches: pool them (loss is already global)
            acc = dd.pool_metrics(acc, self.ranks, keep=("loss", "grad_norm"))
        return {k: (sum(v) / len(v) if v else 0.0) for k, v in acc.items()}

    def _optimizer_step(self, samples, seqs, members, active, prox, ref, acc) -> None:
        weights = token_weights(
            [len(samples[i].response_ids) for i in members], self.cfg.loss_agg_mode, self.cfg.norm_tokens
        )
        weight_of = dict(zip(members, weights, strict=True))
        todo = [i for i in members if i in active]
        self.opt.zero_grad(set_to_none=True)
        total_loss = 0.0
        mine, mbs = self._share(seqs, todo)
        for n, mb in enumerate(mbs):
            if self.world > 1:  # reduce-scatter the summed gradients once, after the last pass
                self.policy.set_requires_gradient_sync(n == len(mbs) - 1)
            if mb is None:
                self.forward(dd.dummy().to(self.device))[0].sum().mul(0.0).backward()
                continue
            idx = [mine[k] for k in mb.samples]
            self._forwarded += mb.tokens
            loss, stats = self._micro(mb.to(self.device), idx, samples, weight_of, prox, ref)
            loss.backward()
            total_loss += float(loss.detach())
            for k, v in stats.items():
                acc[k].append(v)
        if self.world > 1:
            total_loss = dd.sum_over_ranks(total_loss, self.ranks)
        limit = self.cfg.grad_clip if self.cfg.grad_clip > 0 else math.inf
        norm = torch.nn.utils.clip_grad_norm_(self.params, limit) if todo else torch.tensor(0.0)
        if todo:
            self.opt.step()
        acc["loss"].append(total_loss)
        acc["grad_norm"].append(float(dd.full(norm)))

    def _micro(self, mb: MicroBatch, idx, samples, weight_of, prox, ref):
        logp, entropy = self.forward(mb)
        dev = logp.device

        def rows(values) -> torch.Tensor:
            return torch.cat([torch.as_tensor(values[i], dtype=torch.float32) for i in idx]).to(dev)

        p = rows(prox) if prox is not None else logp.detach()
        behav = torch.cat(
            [
                _behaviour(samples[i], p_part)
                for i, p_part in zip(idx, torch.split(p.cpu(), mb.response_lens), strict=True)
            ]
        ).to(dev)

        def per_row(f) -> torch.Tensor:
            """One value per sample, repeated over that sample's response tokens."""
            lens = zip(idx, mb.response_lens, strict=True)
            return torch.cat([torch.full((n,), f(i), dtype=torch.float32) for i, n in lens]).to(dev)

        adv, weight = per_row(lambda i: samples[i].advantage), per_row(lambda i: weight_of[i])
        r = rows(ref) if ref is not None else None
        loss, stats = policy_loss(logp, p, behav, adv, weight, self.loss, r, mb.response_lens)
        out = micro_metrics(stats, entropy, p - behav, mb.response_lens)
        return loss, out

    # ---- state (treegrpo_learner._trainer_state: the optimizer and RNG, the adapter's I/O) ----
    def state(self) -> dict:
        return trainer_state.capture(self.opt, self.params, self.ranks)

    def load_state(self, state: dict) -> None:
        trainer_state.restore(self.opt, self.params, self.ranks, state)

    def export(self):
        """What a version's checkpoint and push save (`save_pretrained`)."""
        return trainer_state.exportable(self.model, self.ranks)

    def load_adapter(self, adapter_dir) -> None:
        """Copy a saved adapter's weights into the live (possibly sharded) adapter."""
        trainer_state.load_adapter(self.model, self.ranks, adapter_dir)


def _behaviour(s: TrainSample, prox_part: torch.Tensor) -> torch.Tensor:
    """Behaviour logprobs as recorded by the sampler; the proximal ones where none were recorded."""
    if len(s.behaviour_logprobs) != len(s.response_ids):
        return prox_part.float()
    return torch.tensor(s.behaviour_logprobs, dtype=torch.float32)
