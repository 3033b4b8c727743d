"""The sharded learner on 2 gloo ranks (CPU): the same loss and gradients as one rank over the same
batch, work split by tokens, and a checkpoint that resumes bit-for-bit with fresh ranks.

Imports a private module: `treegrpo_learner._checkpoint`, `treegrpo_learner._distributed`,
`treegrpo_learner._model`, `treegrpo_learner._ranks`, `treegrpo_learner._trainer` (what these tests
exercise is not on the package's public surface).
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest
import torch

from treegrpo_learner import _checkpoint as ckpt
from treegrpo_learner._distributed import balance
from treegrpo_learner._model import load_base, save_tiny, wrap_lora
from treegrpo_learner._trainer import PolicyTrainer, TrainerSettings, TrainSample
from treegrpo_learner.config import LoraSettings

pytestmark = pytest.mark.timeout(300)
LORA = LoraSettings(r=8, alpha=16)
SETTINGS = TrainerSettings(lr=1e-2, micro_batch_tokens=64)
# two optimizer steps per batch and a KL term: the proximal and reference passes run on the ranks too
FULL = TrainerSettings(lr=1e-2, micro_batch_tokens=64, mini_batches=2, kl_coef=0.05)


def batch(n: int, seed: int = 0) -> list[TrainSample]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        length = rng.randint(8, 60)
        ids = [rng.randrange(3, 96) for _ in range(length)]
        p = max(1, length // 4)
        out.append(
            TrainSample(
                "g",
                f"n{i}",
                tuple(ids[:p]),
                tuple(ids[p:]),
                tuple([-4.5] * (length - p)),
                rng.choice([1.0, -0.5, 0.7, 0.0]),
            )
        )
    return out


def one_rank(model_dir: Path, settings: TrainerSettings = SETTINGS) -> PolicyTrainer:
    torch.manual_seed(0)
    return PolicyTrainer(wrap_lora(load_base(model_dir), LORA), settings)


def grads(trainer: PolicyTrainer) -> dict[str, torch.Tensor]:
    return {n: p.grad.detach().clone() for n, p in trainer.model.named_parameters() if p.requires_grad}


def test_balance_splits_by_tokens_not_by_count():
    lengths = [1000, 10, 10, 10, 10, 10, 900, 20]
    shares = balance(lengths, 2)
    loads = [sum(lengths[i] for i in s) for s in shares]
    assert sorted(i for s in shares for i in s) == list(range(len(lengths)))
    assert max(loads) - min(loads) <= 100, loads  # by count it would be 4 and 4 sequences, 1050 vs 920+...
    assert {len(s) for s in shares} != {4}  # not an even split by count
    assert balance(lengths, 2) == shares  # every rank computes the same plan
    assert balance([5], 3) == [[0], [], []]


def _rank_grads(rank: int, model_dir: str, port: int, out: str) -> None:
    """One of two ranks: a step over the whole batch, then the whole gradients saved by rank 0."""
    from treegrpo_learner._distributed import full
    from treegrpo_learner._ranks import RankSpec, build_trainer, init_ranks

    torch.set_num_threads(1)
    ranks = init_ranks(rank, 2, "cpu", port, 120)
    spec = RankSpec(model_path=model_dir, devices=("cpu", "cpu"), trainer=FULL, lora=LORA.model_dump())
    trainer = build_trainer(spec, ranks)
    metrics = trainer.step(batch(14)).metrics
    whole = {n: full(p.grad) for n, p in trainer.model.named_parameters() if p.requires_grad}
    if rank == 0:
        torch.save({"metrics": metrics, "grads": whole}, out)
    torch.distributed.destroy_process_group()


@pytest.mark.slow
def test_two_rank_step_gives_the_one_rank_loss_and_gradients(tmp_path):
    import torch.multiprocessing as mp

    from treegrpo_learner._ranks import free_port

    model_dir = save_tiny(tmp_path / "model")
    single = one_rank(model_dir, FULL)
    expected = single.step(batch(14)).metrics
    out = tmp_path / "ranks.pt"
    mp.start_processes(
        _rank_grads, args=(str(model_dir), free_port(), str(out)), nprocs=2, start_method="spawn"
    )
    got = torch.load(out)
    assert got["metrics"]["loss"] == pytest.approx(expected["loss"], rel=1e-5, abs=1e-7)
    assert got["metrics"]["grad_norm"] == pytest.approx(expected["grad_norm"], rel=1e-5)
    assert got["metrics"]["sequences_trained"] == expected["sequences_trained"]
    reference = grads(single)
    assert reference.keys() == got["grads"].keys()
    nonzero = 0
    for name, g in reference.items():
        assert torch.allclose(got["grads"][name], g, rtol=1e-4, atol=1e-7), name
        nonzero += int(g.abs().sum() > 0)
    assert nonzero > len(reference) // 3  # the comparison is not between zeros


@pytest.mark.slow
def test_sharded_checkpoint_resumes_bit_for_bit_with_fresh_ranks(tmp_path):
    from treegrpo_learner._ranks import RankedTrainer, RankSpec

    model_dir = save_tiny(tmp_path / "model")
    spec = RankSpec(
        model_path=str(model_dir),
        devices=("cpu", "cpu"),
        trainer=SETTINGS,
        lora=LORA.model_dump(),
        torch_threads=1,
    )
    first, second = batch(10, seed=1), batch(12, seed=2)
    straight = RankedTrainer(spec)
    try:
        straight.step(first)
        expected = straight.step(second).metrics["loss"]
        expected_adapter = straight.export().weights
    finally:
        straight.close()

    before = RankedTrainer(spec)
    try:
        before.step(first)
        path = ckpt.save(
            tmp_path / "ckpt", ckpt.LearnerState(run_id="r", step=1), before.export(), before.state()
        )
    finally:
        before.close()
    _state, trainer_state, adapter = ckpt.load(path)
    after = RankedTrainer(spec)
    try:
        after.load_adapter(adapter)
        after.load_state(trainer_state)
        assert after.step(second).metrics["loss"] == expected
        resumed_adapter = after.export().weights
    finally:
        after.close()
    assert all(torch.equal(expected_adapter[n], resumed_adapter[n]) for n in expected_adapter)

    alone = one_rank(model_dir)  # the same checkpoint on one device: the one-device layout
    alone.load_adapter(adapter)
    alone.load_state(trainer_state)
    assert alone.step(second).metrics["loss"] == pytest.approx(expected, rel=1e-5)
