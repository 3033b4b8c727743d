"""Sequence-level ratios (GSPO), masked rollout corrections (IcePop, the sequence gate) and loss
aggregation modes, against hand-computed references on a few tokens.

Imports a private module: `treegrpo_learner._loss`, `treegrpo_learner._model`,
`treegrpo_learner._packing`, `treegrpo_learner._trainer` (what these tests exercise is not on the
package's public surface).
"""

from __future__ import annotations

import math

import pytest
import torch

from treegrpo_learner._loss import LossSettings, policy_loss, quantiles, token_weights
from treegrpo_learner._model import tiny_qwen3, wrap_lora
from treegrpo_learner._packing import SeqSpec
from treegrpo_learner._trainer import PolicyTrainer, TrainerSettings, TrainSample
from treegrpo_learner.config import LearnerConfig, LoraSettings

pytestmark = pytest.mark.timeout(60)


def _t(xs, grad=False):
    return torch.tensor(xs, dtype=torch.float64, requires_grad=grad)


def test_sequence_ratio_is_the_length_normalised_ratio_with_its_own_clip():
    # seq 1 (2 tokens): log r = [0.1, -0.1] -> s = exp(0) = 1, inside any clip range
    # seq 2 (1 token): log r = 0.01 -> s = e^0.01 > 1 + 4e-4 with A > 0 -> clipped, no gradient
    logp = _t([-1.0, -2.0, -0.5], grad=True)
    prox = _t([-1.1, -1.9, -0.51])
    adv = _t([1.0, 1.0, 2.0])
    weight = _t([1 / 3] * 3)
    s = LossSettings(ratio_level="sequence", tis_cap=0.0)
    loss, stats = policy_loss(logp, prox, prox, adv, weight, s, lens=[2, 1])
    loss.backward()
    # seq 1's loss is -A s (w_1 + w_2) = -2/3 s; d s / d logp_t = s / 2 -> each token -1/3
    assert logp.grad.tolist() == pytest.approx([-1 / 3, -1 / 3, 0.0], abs=1e-12)
    assert stats["ratio"].tolist() == pytest.approx([1.0, 1.0, math.exp(0.01)])
    assert stats["clipped"].tolist() == [0.0, 0.0, 1.0]
    assert float(loss.detach()) == pytest.approx(-2 / 3 - 2 * (1 + 4e-4) / 3, abs=1e-12)


def test_token_ratio_is_unchanged_by_the_sequence_knobs():
    logp = _t([-1.0, -2.0], grad=True)
    prox = _t([-1.1, -1.9])
    s = LossSettings(tis_cap=0.0, seq_clip_low=0.0, seq_clip_high=0.0)  # token level ignores them
    _, stats = policy_loss(logp, prox, prox, _t([1.0, 1.0]), _t([0.5, 0.5]), s, lens=[2])
    assert stats["ratio"].tolist() == pytest.approx([math.exp(0.1), math.exp(-0.1)])


def test_icepop_masks_tokens_whose_train_inference_ratio_leaves_the_band():
    logp = _t([0.0, 0.0, 0.0], grad=True)
    prox = _t([0.0, 0.0, 0.0])
    behav = _t([-1.0, 0.0, 1.0])  # rho = e^1 (> 2: masked), 1 (kept), e^-1 (< 0.5: masked)
    s = LossSettings(tis_cap=0.0, token_mask_low=0.5, token_mask_high=2.0)
    loss, stats = policy_loss(logp, prox, behav, _t([1.0] * 3), _t([1.0] * 3), s)
    loss.backward()
    assert logp.grad.tolist() == pytest.approx([0.0, -1.0, 0.0])
    assert stats["tokens_masked"].tolist() == [1.0, 0.0, 1.0]
    assert float(loss.detach()) == pytest.approx(-1.0)


def test_sequence_gate_masks_every_token_of_a_sequence_with_a_large_geometric_mean_ratio():
    logp = _t([0.0, 0.0, 0.0], grad=True)
    prox = _t([0.0, 0.0, 0.0])
    # seq 1: log rho = [0.9, 0.9] -> e^0.9 = 2.46 > 2: gated; seq 2: log rho = 0.3 -> 1.35: kept,
    # then weighted by TIS min(e^0.3, 2)
    behav = _t([-0.9, -0.9, -0.3])
    s = LossSettings(tis_cap=2.0, seq_mask_low=0.5, seq_mask_high=2.0)
    loss, stats = policy_loss(logp, prox, behav, _t([1.0] * 3), _t([1.0] * 3), s, lens=[2, 1])
    loss.backward()
    assert logp.grad.tolist() == pytest.approx([0.0, 0.0, -math.exp(0.3)])
    assert stats["seq_gate_masked"].tolist() == [1.0, 1.0, 0.0]


def test_loss_agg_modes_weigh_tokens_as_verl_names_them():
    assert token_weights([1, 3], "token-mean") == pytest.approx([0.25, 0.25])
    assert token_weights([1, 3], "seq-mean-token-mean") == pytest.approx([0.5, 1 / 6])
    # Dr. GRPO: sum over tokens / constant 4, mean over the 2 sequences -> every token 1/8
    assert token_weights([1, 3], "seq-mean-token-sum-norm", norm_tokens=4) == pytest.approx([1 / 8, 1 / 8])
    assert token_weights([1, 3, 0], "seq-mean-token-sum-norm") == pytest.approx([1 / 6, 1 / 6, 0.0])
    with pytest.raises(ValueError):
        token_weights([1], "seq-mean")


def test_ratio_quantiles_are_p01_p50_p99():
    q = quantiles(torch.arange(101, dtype=torch.float32))
    assert q == pytest.approx({"p01": 1.0, "p50": 50.0, "p99": 99.0})
    assert quantiles(torch.zeros(0)) == {}


def test_nested_config_reaches_the_trainer_and_defaults_keep_todays_loss():
    cfg = LearnerConfig(
        policy_loss={"ratio_level": "sequence", "loss_agg_mode": "seq-mean-token-sum-norm"},
        rollout_correction={"token_mask_high": 3.0},
    )
    t = TrainerSettings.from_config(cfg)
    assert (t.ratio_level, t.loss_agg_mode, t.token_mask_high) == ("sequence", "seq-mean-token-sum-norm", 3.0)
    d = TrainerSettings.from_config(LearnerConfig())
    assert (d.ratio_level, d.loss_agg_mode, d.token_mask_high, d.seq_mask_high) == (
        "token",
        "token-mean",
        0.0,
        0.0,
    )


def test_a_step_reports_masking_ratio_quantiles_and_entropy():
    model = wrap_lora(tiny_qwen3(seed=0), LoraSettings(r=4, alpha=8))
    trainer = PolicyTrainer(model, TrainerSettings(token_mask_high=2.0, seq_mask_high=2.0))
    prompt, arms = (1, 2, 3), [(4, 5), (6, 7, 8)]
    behaviour = trainer.logprobs([SeqSpec(prompt, a) for a in arms])
    far = tuple(v - 5.0 for v in behaviour[1].tolist())  # the sampler was far less sure: rho = e^5
    samples = [
        TrainSample("g", "n0", prompt, arms[0], tuple(behaviour[0].tolist()), 1.0),
        TrainSample("g", "n1", prompt, arms[1], far, -1.0),
    ]
    m = trainer.step(samples).metrics
    assert m["tokens_masked"] == pytest.approx(3 / 5)
    assert m["sequences_masked"] == pytest.approx(0.5)
    # rho per token: [1, 1, e^5, e^5, e^5]
    assert m["rollout_ratio_p01"] == pytest.approx(1.0, abs=1e-4)
    assert m["rollout_ratio_p50"] == pytest.approx(math.exp(5), rel=1e-4)
    assert 0.0 < m["entropy"] <= math.log(model.config.vocab_size) + 1e-4
