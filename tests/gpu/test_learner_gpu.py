"""The learner's CUDA paths (run on the device machine: `make test-gpu`).

Imports a private module: `treegrpo_learner._logprobs`, `treegrpo_learner._model`,
`treegrpo_learner._packing`, `treegrpo_learner._trainer` (what these tests exercise is not on the
package's public surface).
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from treegrpo_learner._logprobs import chunked_logprobs, full_logprobs
from treegrpo_learner._model import tiny_qwen3, wrap_lora
from treegrpo_learner._packing import SeqSpec
from treegrpo_learner._trainer import PolicyTrainer, TrainerSettings, TrainSample


def LoraSettings(r: int, alpha: float):  # noqa: N802 - the config's shape, without pydantic (not on the GPU image)
    return SimpleNamespace(r=r, alpha=alpha, dropout=0.0, target_modules="all-linear")


pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]


def test_chunked_logprobs_match_full_logits_on_cuda():
    torch.manual_seed(0)
    h = torch.randn(300, 64, device="cuda", requires_grad=True)
    w = torch.randn(5000, 64, device="cuda", requires_grad=True)
    y = torch.randint(0, 5000, (300,), device="cuda")
    ours, _ = chunked_logprobs(h, w, y, chunk=64)
    ref = full_logprobs(h, w, y)
    assert torch.allclose(ours, ref, atol=1e-3)
    g = torch.randn(300, device="cuda")
    for a, b in zip(
        torch.autograd.grad((ours * g).sum(), [h, w]),
        torch.autograd.grad((ref * g).sum(), [h, w]),
        strict=True,
    ):
        assert (a - b).norm() / b.norm() < 1e-3


def test_varlen_packing_matches_one_sequence_per_micro_batch_in_bf16():
    model = wrap_lora(
        tiny_qwen3(vocab=512, hidden=128, layers=2, heads=4, kv_heads=2).cuda().to(torch.bfloat16),
        LoraSettings(r=8, alpha=8),
    )
    trainer = PolicyTrainer(model, TrainerSettings(device="cuda", dtype="bfloat16", micro_batch_tokens=4096))
    g = torch.Generator().manual_seed(0)
    seqs = [
        SeqSpec(
            tuple(torch.randint(0, 512, (p,), generator=g).tolist()),
            tuple(torch.randint(0, 512, (r,), generator=g).tolist()),
        )
        for p, r in ((30, 70), (5, 200), (64, 9))
    ]
    packed = trainer.logprobs(seqs)
    trainer.budget = 1
    alone = trainer.logprobs(seqs)
    for a, b in zip(packed, alone, strict=True):
        assert (a - b).abs().mean() < 0.02


def test_bf16_step_raises_the_rewarded_sequence():
    model = wrap_lora(
        tiny_qwen3(vocab=64, hidden=64, layers=2).cuda().to(torch.bfloat16), LoraSettings(r=8, alpha=16)
    )
    trainer = PolicyTrainer(model, TrainerSettings(device="cuda", dtype="bfloat16", lr=2e-2, grad_clip=0))
    arms = [(4, 5, 6), (7, 8, 9), (10, 11, 12)]

    def winner() -> float:
        return float(trainer.logprobs([SeqSpec((1, 2), arms[1])])[0].sum())

    before = winner()
    for _ in range(4):
        lps = trainer.logprobs([SeqSpec((1, 2), a) for a in arms])
        trainer.step(
            [
                TrainSample("g", str(i), (1, 2), a, tuple(lps[i].tolist()), adv)
                for i, (a, adv) in enumerate(zip(arms, [-0.7, 1.4, -0.7], strict=True))
            ]
        )
    assert winner() > before + 0.5
