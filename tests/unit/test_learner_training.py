"""Training behaviour on a tiny random Qwen3: a bandit is learned; a restored checkpoint continues
exactly where it stopped.

Imports a private module: `treegrpo_learner._checkpoint`, `treegrpo_learner._model`,
`treegrpo_learner._packing`, `treegrpo_learner._trainer` (what these tests exercise is not on the
package's public surface).
"""

from __future__ import annotations

import torch

from treegrpo.advantages import compute
from treegrpo_learner import _checkpoint as ckpt
from treegrpo_learner._model import tiny_qwen3, wrap_lora
from treegrpo_learner._packing import SeqSpec
from treegrpo_learner._trainer import PolicyTrainer, TrainerSettings, TrainSample
from treegrpo_learner.config import LoraSettings

PROMPT = (1, 2, 3)
ARMS = [(4, 5, 6), (7, 8, 9), (10, 11, 12), (13, 14, 15)]
WINNER = 1


def policy(seed: int = 0):
    return wrap_lora(tiny_qwen3(seed=seed), LoraSettings(r=8, alpha=16))


def group(trainer: PolicyTrainer, rewards: list[float], estimator: str = "grpo") -> list[TrainSample]:
    behaviour = trainer.logprobs([SeqSpec(PROMPT, arm) for arm in ARMS])
    adv = compute(estimator, rewards)
    return [
        TrainSample("g", f"n{i}", PROMPT, arm, tuple(behaviour[i].tolist()), adv[i])
        for i, arm in enumerate(ARMS)
    ]


def winner_logprob(trainer: PolicyTrainer) -> float:
    return float(trainer.logprobs([SeqSpec(PROMPT, ARMS[WINNER])])[0].sum())


def test_toy_bandit_the_rewarded_completion_becomes_more_likely():
    trainer = PolicyTrainer(policy(), TrainerSettings(lr=2e-2, grad_clip=0))
    rewards = [1.0 if i == WINNER else 0.0 for i in range(len(ARMS))]
    history = [winner_logprob(trainer)]
    for _ in range(6):
        out = trainer.step(group(trainer, rewards))
        assert out.metrics["sequences_trained"] == 4
        history.append(winner_logprob(trainer))
    assert all(b > a for a, b in zip(history[:3], history[1:4], strict=True)), history
    assert history[-1] - history[0] > 1.0, history  # e^1: the arm became at least 2.7x more likely
    others = [float(lp.sum()) for lp in trainer.logprobs([SeqSpec(PROMPT, a) for a in ARMS])]
    assert others[WINNER] == max(others)


def test_group_without_signal_leaves_the_policy_unchanged():
    trainer = PolicyTrainer(policy(), TrainerSettings(lr=2e-2))
    before = [p.detach().clone() for p in trainer.params]
    out = trainer.step(group(trainer, [-0.5] * 4))
    assert out.metrics["sequences_trained"] == 0
    assert all(torch.equal(a, b) for a, b in zip(before, trainer.params, strict=True))


def test_restored_checkpoint_continues_bit_for_bit(tmp_path):
    settings = TrainerSettings(lr=1e-2)
    rewards = [0.3, 1.0, -0.5, 0.0]
    straight = PolicyTrainer(policy(), settings)
    batches = [group(straight, rewards)]
    straight.step(batches[0])
    batches.append(group(straight, rewards))
    straight.step(batches[1])

    first = PolicyTrainer(policy(), settings)
    first.step(batches[0])
    state = ckpt.LearnerState(run_id="r", step=1, last_stream_seq=42, trained=["g"])
    path = ckpt.save(tmp_path, state, first.model, first.state())
    assert ckpt.latest(tmp_path) == path and not list(tmp_path.glob(".tmp-*"))

    restored_state, trainer_state, adapter = ckpt.load(ckpt.latest(tmp_path))
    resumed = PolicyTrainer(policy(), settings)
    ckpt.load_adapter_weights(resumed.model, adapter)
    resumed.load_state(trainer_state)
    assert restored_state.last_stream_seq == 42 and restored_state.trained == ["g"]
    resumed.step(batches[1])
    for a, b in zip(straight.params, resumed.params, strict=True):
        assert torch.equal(a, b)


def test_a_crash_while_saving_leaves_the_previous_checkpoint(tmp_path):
    trainer = PolicyTrainer(policy(), TrainerSettings())
    ckpt.save(tmp_path, ckpt.LearnerState(run_id="r", step=1), trainer.model, trainer.state())
    (tmp_path / ".tmp-step_000002-999").mkdir()  # what a kill during the next save leaves behind
    (tmp_path / ".tmp-step_000002-999" / "state.json").write_text("{truncated")
    assert ckpt.latest(tmp_path).name == "step_000001"


def test_lora_dropout_acts_in_the_update_and_never_in_scoring():
    """The update runs in train mode (dropout on, whatever mode the model was loaded in), the
    logprobs that score behaviour, proximal and reference policies in eval mode (deterministic)."""
    model = wrap_lora(tiny_qwen3(seed=0), LoraSettings(r=8, alpha=16, dropout=0.5))
    model.eval()  # as from_pretrained returns it
    trainer = PolicyTrainer(model, TrainerSettings(lr=1e-2, mini_batches=2))
    seen: list[bool] = []
    dropouts = [m for n, m in model.named_modules() if n.endswith("lora_dropout.default")]
    assert dropouts, "no LoRA dropout module: the test would not test anything"
    dropouts[0].register_forward_hook(lambda mod, args, out: seen.append(mod.training))
    first = trainer.logprobs([SeqSpec(PROMPT, ARMS[0])])[0]
    assert torch.equal(first, trainer.logprobs([SeqSpec(PROMPT, ARMS[0])])[0])  # no dropout noise
    assert seen and not any(seen)
    seen.clear()
    trainer.step(group(trainer, [1.0, 0.0, 0.0, 0.0]))
    assert True in seen  # the update's forward passes ran with dropout active
    assert not model.training  # handed back in the mode it came in
