"""Shared-prompt batches: the prompt forwarded once gives the packed batch's loss and gradient.

Imports a private module: `treegrpo_learner.sft._batches`, `treegrpo_learner.sft._train` (what these
tests exercise is not on the package's public surface).
"""

from __future__ import annotations

import random

import pytest

from treegrpo_learner.sft._batches import Example, batch_loss, is_shared, make_batches


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    import torch
    from transformers import AutoModelForCausalLM

    from treegrpo.models import build_model

    path = build_model(
        tmp_path_factory.mktemp("m") / "tiny", size="tiny", vocab_size=512, tokenizer_bytes=200_000
    )
    torch.manual_seed(0)
    return AutoModelForCausalLM.from_pretrained(path, dtype=torch.float64)


def draft_examples(n: int = 4, prompt_len: int = 37, pad_id: int = 0) -> list[Example]:
    rng = random.Random(1)
    prompt = [rng.randrange(5, 500) for _ in range(prompt_len)]
    # completions of different lengths, one holding the pad id as a real token
    comps = [[rng.randrange(5, 500) for _ in range(rng.randrange(3, 20))] for _ in range(n)]
    comps[1][1] = pad_id
    return [Example(prompt + c, prompt_len) for c in comps]


def grads(model):
    return {k: p.grad.clone() for k, p in model.named_parameters() if p.grad is not None}


def test_shared_prompt_loss_and_gradient_equal_the_packed_batch(tiny):
    import torch

    batch = draft_examples()
    assert is_shared(batch)
    tiny.zero_grad()
    packed, n_packed = batch_loss(tiny, batch, 0, "cpu", share_prompts=False)
    packed.backward()
    g_packed = grads(tiny)
    tiny.zero_grad()
    shared, n_shared = batch_loss(tiny, batch, 0, "cpu", share_prompts=True)
    shared.backward()
    g_shared = grads(tiny)
    assert n_shared == n_packed == sum(e.n_completion for e in batch)
    assert torch.allclose(shared, packed, rtol=1e-9, atol=1e-10)
    assert g_shared.keys() == g_packed.keys()
    for k in g_packed:  # rotary tables stay float32 in float64 models: agreement to ~1e-7, not 1e-15
        assert (g_shared[k] - g_packed[k]).norm() <= 1e-5 * g_packed[k].norm(), k


def test_pairs_with_different_prompts_are_never_batched_as_shared():
    a, b = draft_examples(2), draft_examples(2, prompt_len=30)
    assert not is_shared([a[0], b[0]]) and not is_shared([a[0]])
    batches = make_batches(a + b, 10_000, random.Random(0))
    assert sorted(map(sorted, batches)) == [[0, 1], [2, 3]]


def test_shared_batches_respect_the_token_budget_counting_the_prompt_once():
    ex = draft_examples(40, prompt_len=100)
    batches = make_batches(ex, 300, random.Random(0))
    assert sorted(i for b in batches for i in b) == list(range(40))
    for b in batches:
        longest = max(ex[i].n_completion for i in b)
        assert len(b) == 1 or 100 + longest * len(b) <= 300
    packed = make_batches(ex, 300, random.Random(0), share_prompts=False)
    assert len(packed) > len(batches)  # whole pairs: the prompt is paid per pair


def test_learning_rate_decays_over_the_time_budget_when_it_runs_out_before_the_steps():
    from treegrpo_learner.sft import SftConfig
    from treegrpo_learner.sft._train import lr_factor

    cfg = SftConfig(warmup_steps=4, lr_min_ratio=0.1, max_seconds=100)
    assert lr_factor(0, 0.0, 10_000, cfg) == 0.25  # warm-up
    assert lr_factor(10, 0.0, 10_000, cfg) > 0.99  # peak
    assert abs(lr_factor(10, 50.0, 10_000, cfg) - 0.55) < 1e-9  # half the time: half way down
    assert lr_factor(10, 100.0, 10_000, cfg) == 0.1  # time is up: the floor
    steps_only = SftConfig(warmup_steps=4, lr_min_ratio=0.1)
    assert abs(lr_factor(4 + 48, 1e6, 100, steps_only) - 0.55) < 1e-9  # no time budget: steps decide
