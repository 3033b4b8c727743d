"""Siblings that share a prompt compute it once (packed segments; Gated DeltaNet children start from
the prompt's final state) and the learner's update is the per-sequence one: same log-probs, loss and
per-parameter LoRA gradients, on a tiny random Qwen3.5-shaped hybrid (torch reference kernels).

Imports a private module: `treegrpo_learner._model`, `treegrpo_learner._packing`,
`treegrpo_learner._trainer` (what these tests exercise is not on the package's public surface).
"""

from __future__ import annotations

import copy
from types import SimpleNamespace

import pytest
import torch

from treegrpo_learner._model import tiny_qwen35, wrap_lora
from treegrpo_learner._packing import SeqSpec, pack
from treegrpo_learner._trainer import PolicyTrainer, TrainerSettings, TrainSample

pytestmark = pytest.mark.timeout(120)
LORA = SimpleNamespace(r=4, alpha=8, dropout=0.0, target_modules="all-linear")


def samples() -> list[TrainSample]:
    """Two groups (one prompt shorter than the 4-tap convolution's reach), a lone sequence, and a
    sibling of length 1."""
    g = torch.Generator().manual_seed(3)

    def ids(n: int) -> tuple[int, ...]:
        return tuple(torch.randint(1, 64, (n,), generator=g).tolist())

    long_prompt, short_prompt = ids(9), ids(2)
    spec = [(long_prompt, 6, 1.0), (long_prompt, 1, -0.5), (long_prompt, 4, 0.8), (short_prompt, 5, -1.0)]
    spec += [(short_prompt, 3, 0.6), (ids(4), 5, 0.3)]
    return [
        TrainSample(f"g{len(p)}", f"n{k}", p, ids(r), tuple([-4.0] * r), adv)
        for k, (p, r, adv) in enumerate(spec)
    ]


def policy(seed: int = 0):
    model = wrap_lora(tiny_qwen35(seed=seed), LORA)
    torch.manual_seed(seed + 1)
    with torch.no_grad():  # LoRA B starts at zero, which would leave every A gradient zero
        for p in model.parameters():
            if p.requires_grad:
                p.normal_(0.0, 0.3)
    return model


def step_grads(model, **settings) -> tuple[dict, dict[str, torch.Tensor]]:
    # lr 0: AdamW leaves the weights alone, so both paths can run on one model; two mini-batches
    # and a KL term make the proximal and reference passes run through the same packing too
    cfg = TrainerSettings(lr=0.0, grad_clip=0.0, mini_batches=2, kl_coef=0.1, **settings)
    metrics = PolicyTrainer(model, cfg).step(samples()).metrics
    grads = {n: p.grad.clone() for n, p in model.named_parameters() if p.requires_grad}
    return metrics, grads


def test_siblings_share_one_prompt_segment_and_positions_continue_after_it():
    seqs = [SeqSpec(s.prompt_ids, s.response_ids) for s in samples()]
    (mb,) = pack(seqs, 10_000)
    lay = mb.layout
    assert lay.n_roots == 3 and len(lay.seg_lens) == 3 + 5  # 2 prompts + 1 lone sequence, 5 siblings
    assert mb.tokens == 9 + 2 + 9 + (6 + 1 + 4) + (5 + 3)  # each prompt once
    assert mb.input_ids[0, mb.rows + 1].tolist()[5:] != mb.targets.tolist()[5:]  # children read their prompt
    first = lay.root_tokens  # the first child: the long prompt's first sibling
    assert mb.position_ids[0, first : first + 6].tolist() == list(range(9, 15))
    assert mb.rows[len(seqs[5].response_ids)] == 8  # its first token is predicted by the prompt's last
    assert sorted(mb.samples) == list(range(len(seqs)))
    budget = 9 + 6 + 1  # the long prompt's group no longer fits one unit: it is split, the prompt repeated
    assert sum(m.tokens for m in pack(seqs, budget)) == mb.tokens + 9


def test_shared_logprobs_equal_transformers_forward_of_each_sequence_alone():
    model = policy()
    plain = copy.deepcopy(model)  # transformers' own Gated DeltaNet layers, never replaced
    seqs = [SeqSpec(s.prompt_ids, s.response_ids) for s in samples()]
    shared = PolicyTrainer(model, TrainerSettings()).logprobs(seqs)
    with torch.no_grad():
        for s, lp in zip(seqs, shared, strict=True):
            ids = torch.tensor([list(s.prompt_ids) + list(s.response_ids)])
            logits = plain(input_ids=ids).logits[0, len(s.prompt_ids) - 1 : -1].float()
            alone = torch.log_softmax(logits, -1).gather(1, torch.tensor(s.response_ids)[:, None])[:, 0]
            assert torch.allclose(alone, lp, atol=1e-5), (alone, lp)


@pytest.mark.parametrize("budget", [10_000, 24])  # one micro-batch; groups split over several
def test_shared_prompt_step_has_the_per_sequence_loss_and_gradients(budget):
    model = policy()
    alone, g_alone = step_grads(model, micro_batch_tokens=1, share_prompts=False)  # one sequence each
    shared, g_shared = step_grads(model, micro_batch_tokens=budget, share_prompts=True)
    assert shared["loss"] == pytest.approx(alone["loss"], rel=1e-5, abs=1e-7)
    # the norm sums every gradient in float32 in another order: the gradients' own tolerance (seen at
    # 1.0e-5 relative on one machine's CPU, within 1e-5 on another's)
    assert shared["grad_norm"] == pytest.approx(alone["grad_norm"], rel=1e-4)
    nonzero = 0
    for name, g in g_alone.items():
        assert torch.allclose(g_shared[name], g, rtol=1e-4, atol=1e-6), name
        nonzero += int(g.abs().sum() > 0)
    assert nonzero == len(g_alone)  # every LoRA matrix, of both layer kinds, got a gradient
    assert any("linear_attn.in_proj_qkv" in n for n in g_alone) and any(
        "self_attn.q_proj" in n for n in g_alone
    )


def test_the_step_reports_the_tokens_its_update_forwarded_with_shared_prompts_once():
    # two mini-batches: [g9 x3] and [g2 x2, g4]; shared, each prompt runs once per mini-batch
    shared, _ = step_grads(policy(), micro_batch_tokens=4096, share_prompts=True)
    alone, _ = step_grads(policy(), micro_batch_tokens=4096, share_prompts=False)
    assert shared["tokens_forwarded"] == (9 + 6 + 1 + 4) + (2 + 5 + 3) + (4 + 5)
    assert alone["tokens_forwarded"] == (15 + 10 + 13) + (7 + 5 + 9)
    assert shared["update_tokens_per_s"] > 0
