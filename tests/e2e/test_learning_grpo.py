"""GRPO alone learns, on a setting with a clear signal (slow; `make test-slow`).

The setting. Each of the four built-in tasks offers the policy the seed corpus's scripts for it
(21 valid ones of varied quality and 7-8 that fail the way model code fails). The policy is a
tiny random Qwen3 (the learner's `tiny_qwen3`, all weights trained); its one-token response picks
a script (token id mod the number of scripts). Each round samples one group of G=32 per task;
each sibling's outcome is the picked script's REAL outcome on the generated task data (final
status and oriented metric recorded in treegrpo_learner/sft/corpus/manifest.json by `verify_corpus`:
the grader's own grading of a real execution, not re-run here to keep the test minutes long). Rewards are the
grader's shaping (`treegrpo_grader.rewards.group_rewards`), advantages the learner's plain `grpo`
estimator, the loss the learner's `policy_loss` (PPO clip, token-mean), one AdamW step per round.

What it shows: mean group reward rises because the policy learns to stop picking scripts that
crash or write invalid submissions (under the grader's group-relative shaping a group of only
valid siblings averages ~0.5; a failed sibling gets -0.5). It does not show that a language model
learns to *write* better code (the actions are fixed scripts), and it drives `policy_loss`
directly, not `PolicyTrainer.step`: with the trainer's LoRA-only update this 32-wide model's
logits barely moved within the test's budget, so this test would say nothing about learning.

Noise, measured with this file's `run` on the dev machine on 2026-11-30 (60 rounds, windows of 10
rounds): the control (same sampling, no update) gives last-minus-first differences of mean group
reward of -0.014, 0.025, -0.000, -0.017, 0.012 over seeds 0-4 (mean 0.001, std 0.017, max |d|
0.025); learning gives 0.136, 0.163, 0.150, 0.145, 0.148 over seeds 0-4 (first window ~0.28, last
~0.50). The test runs seed 0 with learning and the five controls itself (~2 minutes on 2 cores)
and requires the learned rise to exceed the control mean by 6 control standard deviations and the
largest control difference 4 times.

Imports a private module: `treegrpo_learner._loss`, `treegrpo_learner._model` (what these tests exercise
is not on the package's public surface).
"""

from __future__ import annotations

import statistics

import pytest
import torch

from treegrpo import advantages
from treegrpo_grader.rewards import Member, Shaping, group_rewards
from treegrpo_learner._loss import LossSettings, policy_loss
from treegrpo_learner._model import parts, tiny_qwen3
from treegrpo_learner.sft import load_corpus

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

ROUNDS, GROUP, WINDOW, VOCAB, LR = 60, 32, 10, 96, 3e-3


def outcomes() -> dict[str, list[tuple[str, float | None]]]:
    """task -> (final status, oriented metric) of each corpus script, from real runs."""
    out: dict[str, list[tuple[str, float | None]]] = {}
    for s in load_corpus():
        assert s.verified is not None, (
            f"{s.file} is unverified: run python -m treegrpo_learner.sft.verify_corpus"
        )
        out.setdefault(s.task, []).append((s.verified.status, s.verified.oriented))
    return out


def logprobs(model, prompt: list[int]) -> torch.Tensor:
    """Log-probabilities of the first response token (the policy's whole action)."""
    decoder, head = parts(model)
    hidden = decoder(
        input_ids=torch.tensor([prompt]), position_ids=torch.arange(len(prompt))[None], use_cache=False
    ).last_hidden_state
    return torch.log_softmax(hidden[0, -1] @ head.T, dim=-1)


def run(seed: int, learn: bool, rounds: int = ROUNDS, lr: float = LR) -> list[float]:
    """Mean group reward of each round (one group of GROUP siblings per task)."""
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    model = tiny_qwen3(vocab=VOCAB, hidden=32, layers=2, seed=seed)
    for p in model.parameters():
        p.requires_grad_(True)
    opt = torch.optim.AdamW(model.parameters(), lr=lr)
    table = outcomes()
    shaping, loss_cfg = Shaping(), LossSettings()
    means = []
    for rnd in range(rounds):
        loss, rewards_all = torch.zeros(()), []
        for t, task in enumerate(sorted(table)):
            prompt = [1 + t, 90, 91, 92]
            logp = logprobs(model, prompt)
            toks = torch.multinomial(logp.detach().exp(), GROUP, replacement=True, generator=gen)
            picked = [table[task][int(tok) % len(table[task])] for tok in toks]
            rewards = group_rewards(
                [Member(f"{rnd}-{t}-{i}", st, o) for i, (st, o) in enumerate(picked)], shaping
            )
            adv = torch.tensor(advantages.compute("grpo", rewards))
            behaviour = logp.detach()[toks]  # sampled from this very policy
            part, _ = policy_loss(
                logp[toks],
                behaviour,
                behaviour,
                adv,
                torch.full((GROUP,), 1.0 / (GROUP * len(table))),
                loss_cfg,
            )
            loss = loss + part
            rewards_all += rewards
        means.append(statistics.fmean(rewards_all))
        if learn:
            opt.zero_grad()
            loss.backward()
            opt.step()
    return means


def improvement(means: list[float], window: int = WINDOW) -> float:
    return statistics.fmean(means[-window:]) - statistics.fmean(means[:window])


def test_grpo_alone_raises_mean_group_reward_far_beyond_seed_noise():
    learned = improvement(run(seed=0, learn=True))
    controls = [improvement(run(seed=s, learn=False)) for s in range(5)]
    mean, std = statistics.fmean(controls), statistics.stdev(controls)
    assert learned > 0.1, f"mean group reward rose only {learned:.3f}"
    assert learned > mean + 6 * std, f"learned +{learned:.3f} vs controls {controls}"
    assert learned > 4 * max(abs(c) for c in controls), f"learned +{learned:.3f} vs controls {controls}"
