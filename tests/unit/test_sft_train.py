"""The SFT loop on a tiny local model: loss on completions only, full and LoRA, outputs in place."""

from __future__ import annotations

import json

import pytest

from treegrpo_learner.sft import SftConfig, make_pair, train_sft


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    from treegrpo.models import build_model

    return build_model(
        tmp_path_factory.mktemp("m") / "tiny", size="tiny", vocab_size=512, tokenizer_bytes=200_000
    )


def pairs():
    msgs = [
        {"role": "system", "content": "You write Python."},
        {"role": "user", "content": "Task: add numbers."},
    ]
    return [
        make_pair(msgs, "Plan: add.\n\n```python\nprint(1 + 2)\n```", "t", "draft", "test:a"),
        make_pair(msgs, "Plan: sum a list.\n\n```python\nprint(sum([1, 2]))\n```", "t", "draft", "test:b"),
    ]


def test_full_fine_tuning_memorises_completions_and_writes_model_curve_and_meta(tiny_model, tmp_path):
    cfg = SftConfig(max_steps=60, lr=5e-3, warmup_steps=2, batch_tokens=4096, torch_threads=1)
    out = tmp_path / "sft"
    res = train_sft(cfg, pairs(), tiny_model, out, show_progress=False)
    assert res.steps == 60 and res.pairs == 2 and res.by_mode == {"draft": 2}
    assert res.final_loss < 0.5 * res.first_loss
    for name in (
        "config.json",
        "model.safetensors",
        "tokenizer.json",
        "loss.png",
        "loss.jsonl",
        "sft_meta.json",
    ):
        assert (out / name).is_file(), name
    assert not out.with_name("sft.tmp").exists()
    meta = json.loads((out / "sft_meta.json").read_text())
    assert meta["result"]["steps"] == 60 and meta["config"]["method"] == "full"


def test_lora_trains_only_the_adapter_and_merges_into_a_loadable_model(tiny_model, tmp_path):
    from transformers import AutoModelForCausalLM

    cfg = SftConfig(method="lora", lora={"r": 4, "alpha": 8}, max_steps=20, lr=5e-3, batch_tokens=4096)
    res = train_sft(cfg, pairs(), tiny_model, tmp_path / "lora", show_progress=False)
    assert res.final_loss < res.first_loss
    merged = AutoModelForCausalLM.from_pretrained(tmp_path / "lora")
    assert not any("lora" in n for n, _ in merged.named_parameters())


def test_pairs_longer_than_the_limit_are_dropped_and_counted(tiny_model, tmp_path):
    long = make_pair([{"role": "user", "content": "x " * 400}], "y", "t", "draft", "test:long")
    res = train_sft(
        SftConfig(max_steps=2, max_seq_tokens=128),
        [*pairs(), long],
        tiny_model,
        tmp_path / "o",
        show_progress=False,
    )
    assert res.dropped_too_long == 1 and res.pairs == 2


def test_a_time_budget_stops_training_early_and_still_writes_the_model(tiny_model, tmp_path):
    cfg = SftConfig(max_steps=100_000, max_seconds=1.0, lr=5e-3, batch_tokens=4096, torch_threads=1)
    res = train_sft(cfg, pairs(), tiny_model, tmp_path / "timed", show_progress=False)
    assert 1 <= res.steps < 100_000 and res.seconds < 30
    rows = [json.loads(line) for line in (tmp_path / "timed" / "loss.jsonl").read_text().splitlines()]
    assert len(rows) == res.steps  # the decay over the budget itself: test_sft_batches.py
    assert (tmp_path / "timed" / "model.safetensors").is_file()
