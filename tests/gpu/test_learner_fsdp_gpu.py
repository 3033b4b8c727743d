"""The sharded learner on two GPUs (NCCL): run on a two-GPU machine with `pytest -m gpu tests/gpu`.

Imports a private module: `treegrpo_learner._checkpoint`, `treegrpo_learner._model`,
`treegrpo_learner._ranks`, `treegrpo_learner._trainer` (what these tests exercise is not on the
package's public surface).
"""

from __future__ import annotations

import random
from types import SimpleNamespace

import pytest
import torch

from treegrpo_learner import _checkpoint as ckpt
from treegrpo_learner._model import load_base, save_tiny, wrap_lora
from treegrpo_learner._trainer import PolicyTrainer, TrainerSettings, TrainSample

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.timeout(600),
    pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two CUDA GPUs"),
]
LORA = SimpleNamespace(
    r=8, alpha=16.0, dropout=0.0, target_modules="all-linear"
)  # no pydantic on the GPU image
SETTINGS = TrainerSettings(lr=1e-3, micro_batch_tokens=512, device="cuda:0", dtype="bfloat16")


def batch(n: int, seed: int) -> list[TrainSample]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        length = rng.randint(32, 400)
        ids = [rng.randrange(3, 512) for _ in range(length)]
        p = length // 4
        out.append(
            TrainSample(
                "g",
                f"n{i}",
                tuple(ids[:p]),
                tuple(ids[p:]),
                tuple([-5.0] * (length - p)),
                rng.choice([1.0, -0.5, 0.7]),
            )
        )
    return out


def test_two_gpu_step_matches_one_gpu_and_resumes_bit_for_bit(tmp_path):
    from treegrpo_learner._ranks import RankedTrainer, RankSpec

    model_dir = save_tiny(tmp_path / "model", vocab=512, hidden=128, layers=2)
    torch.manual_seed(0)
    single = PolicyTrainer(wrap_lora(load_base(model_dir, "bfloat16", "cuda:0"), LORA), SETTINGS)
    expected = single.step(batch(24, 1)).metrics
    spec = RankSpec(
        model_path=str(model_dir), devices=("cuda:0", "cuda:1"), trainer=SETTINGS, lora=vars(LORA)
    )
    two = RankedTrainer(spec)
    try:
        got = two.step(batch(24, 1)).metrics
        path = ckpt.save(tmp_path / "ckpt", ckpt.LearnerState(run_id="r", step=1), two.export(), two.state())
        follow = two.step(batch(16, 2)).metrics["loss"]
    finally:
        two.close()
    assert got["loss"] == pytest.approx(expected["loss"], rel=2e-2, abs=1e-4)  # bf16, another reduction order
    assert got["grad_norm"] == pytest.approx(expected["grad_norm"], rel=5e-2)
    _state, trainer_state, adapter = ckpt.load(path)
    again = RankedTrainer(spec)
    try:
        again.load_adapter(adapter)
        again.load_state(trainer_state)
        assert again.step(batch(16, 2)).metrics["loss"] == follow
    finally:
        again.close()
