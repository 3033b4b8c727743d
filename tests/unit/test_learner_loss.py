"""The policy loss, the chunked log-probabilities and packing, against hand-computed references.

Imports a private module: `treegrpo_learner._logprobs`, `treegrpo_learner._loss`,
`treegrpo_learner._model`, `treegrpo_learner._packing`, `treegrpo_learner._trainer` (what these tests
exercise is not on the package's public surface).
"""

from __future__ import annotations

import math

import pytest
import torch

from treegrpo_learner._logprobs import chunked_logprobs, full_logprobs
from treegrpo_learner._loss import LossSettings, policy_loss, token_weights
from treegrpo_learner._model import tiny_qwen3, wrap_lora
from treegrpo_learner._packing import SeqSpec, pack, plan
from treegrpo_learner._trainer import PolicyTrainer, TrainerSettings
from treegrpo_learner.config import LoraSettings


def test_loss_gradient_matches_the_hand_computed_example():
    logp = torch.tensor([-1.0, -2.0, -0.5], dtype=torch.float64, requires_grad=True)
    prox = torch.tensor([-1.0, -2.5, -0.5], dtype=torch.float64)
    behav = torch.tensor([-1.2, -2.5, -0.5], dtype=torch.float64)
    adv = torch.tensor([1.0, 1.0, -1.0], dtype=torch.float64)
    ref = torch.tensor([-1.1, -2.0, -0.7], dtype=torch.float64)
    weight = torch.tensor(token_weights([3], "token-mean") * 3, dtype=torch.float64)
    s = LossSettings(clip_low=0.2, clip_high=0.28, tis_cap=2.0, kl_coef=0.1)
    loss, stats = policy_loss(logp, prox, behav, adv, weight, s, ref)
    loss.backward()
    # token 1: ratio 1, unclipped, importance weight e^0.2 -> d/dlogp of -A r w = -w
    # token 2: ratio e^0.5 > 1.28 with A > 0 -> clipped, no policy gradient
    # token 3: ratio 1, A = -1 -> +1; every token adds beta * (1 - e^(ref - logp)); weights 1/3
    w1 = math.exp(0.2)
    pg = [-w1, 0.0, 1.0]
    kl = [1 - math.exp(-1.1 + 1.0), 1 - math.exp(0.0), 1 - math.exp(-0.7 + 0.5)]
    expected = [(p + 0.1 * k) / 3 for p, k in zip(pg, kl, strict=True)]
    assert logp.grad.tolist() == pytest.approx(expected, abs=1e-12)
    assert stats["clipped"].tolist() == [0.0, 1.0, 0.0]
    pg_value = (-w1 * 1 + -1.28 + 1.0) / 3
    kl_value = (
        sum(
            math.exp(r - lp) - (r - lp) - 1
            for r, lp in zip([-1.1, -2.0, -0.7], [-1.0, -2.0, -0.5], strict=True)
        )
        / 3
    )
    assert float(loss.detach()) == pytest.approx(pg_value + 0.1 * kl_value, abs=1e-12)


def test_importance_weights_are_truncated_at_the_cap():
    logp = torch.zeros(2, requires_grad=True)
    prox = torch.zeros(2)
    behav = torch.tensor([-5.0, 0.0])  # token 0: the sampler was far less likely -> weight e^5, capped at 2
    _, stats = policy_loss(logp, prox, behav, torch.ones(2), torch.ones(2), LossSettings(tis_cap=2.0))
    assert stats["tis_weight"].tolist() == [2.0, 1.0]


def test_seq_mean_weights_average_each_sequence_first():
    w = token_weights([1, 3], "seq-mean-token-mean")
    assert w == pytest.approx([0.5, 1 / 6])
    assert sum(wi * n for wi, n in zip(w, [1, 3], strict=True)) == pytest.approx(1.0)


def test_chunked_logprobs_and_gradients_equal_the_full_logits_computation():
    torch.manual_seed(0)
    h = torch.randn(37, 16, dtype=torch.float64, requires_grad=True)
    w = torch.randn(50, 16, dtype=torch.float64, requires_grad=True)
    y = torch.randint(0, 50, (37,))
    ours, entropy = chunked_logprobs(h, w, y, chunk=5)
    ref = full_logprobs(h, w, y)
    assert torch.allclose(ours.double(), ref.double(), atol=1e-5)
    probs = torch.softmax(h @ w.t(), -1)
    assert torch.allclose(entropy.double(), -(probs * probs.log()).sum(-1), atol=1e-4)
    g = torch.randn(37, dtype=torch.float64)
    ga = torch.autograd.grad((ours.double() * g).sum(), [h, w])
    gb = torch.autograd.grad((ref.double() * g).sum(), [h, w])
    for a, b in zip(ga, gb, strict=True):
        assert torch.allclose(a, b, atol=1e-4)


def test_packing_respects_the_budget_and_restarts_positions():
    seqs = [
        SeqSpec((1, 2, 3), (4, 5)),
        SeqSpec((6,), (7, 8, 9)),
        SeqSpec((1, 1), (2,)),
        SeqSpec(tuple(range(1, 11)), (3,)),
    ]
    bins = plan([s.length for s in seqs], budget=8)
    assert sorted(i for b in bins for i in b) == [0, 1, 2, 3]
    assert all(sum(seqs[i].length for i in b) <= 8 for b in bins if len(b) > 1)
    for mb in pack(seqs, 8):
        cu = mb.layout.cu("all")[1]
        assert not mb.layout.has_children  # no two prompts are equal: every sequence is a root
        for s, e in zip(cu[:-1], cu[1:], strict=True):
            assert mb.position_ids[0, s:e].tolist() == list(range(e - s))
        assert (
            mb.input_ids[0, mb.rows + 1].tolist() == mb.targets.tolist()
        )  # each row predicts the next token


def test_packed_logprobs_equal_each_sequence_run_alone():
    model = wrap_lora(tiny_qwen3(seed=1), LoraSettings(r=4, alpha=4))
    seqs = [SeqSpec((1, 2, 3), (4, 5, 6, 7)), SeqSpec((9, 8), (7, 6, 5, 4, 3)), SeqSpec((11,), (12,))]
    packed = PolicyTrainer(model, TrainerSettings(micro_batch_tokens=64)).logprobs(seqs)
    assert len(pack(seqs, 64)) == 1
    with torch.no_grad():
        for s, lp in zip(seqs, packed, strict=True):
            ids = torch.tensor([list(s.prompt_ids) + list(s.response_ids)])
            logits = model(input_ids=ids).logits[0].float()
            alone = (
                torch.log_softmax(logits, -1)[len(s.prompt_ids) - 1 : -1]
                .gather(1, torch.tensor(s.response_ids)[:, None])
                .squeeze(1)
            )
            assert torch.allclose(alone, lp, atol=1e-5)
