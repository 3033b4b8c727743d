"""Prompt rendering from the template files, the data overview, and completion parsing."""

from __future__ import annotations

import pytest

from treegrpo.prompts import data_overview, render_prompt, task_context, trim_output
from treegrpo_sampler import parse_completion


def test_draft_prompt_has_task_instructions_resources_and_data_but_no_hints_or_scores():
    msgs = render_prompt("draft", "Predict the author.", "input/\n    train.csv")
    assert [m["role"] for m in msgs] == ["system", "user"]
    user = msgs[1]["content"]
    for needle in (
        "Predict the author.",
        "./input/",
        "./submission/submission.csv",
        "Validation metric",
        "# /// script",
        "[tool.resources]",
        "# gpu = 1",
        "input/\n    train.csv",
    ):
        assert needle in user
    assert "GPU is available" not in user


def test_gpu_hint_switch_adds_the_gpu_declaration_hint():
    user = render_prompt("draft", "d", "o", gpu_hint=True)[1]["content"]
    assert "declare `gpu = 1`" in user and "killed for leaving it idle" in user


def test_debug_prompt_shows_parent_code_and_trimmed_output():
    out = "x" * 3000 + "MIDDLE" + "y" * 3000
    user = render_prompt("debug", "d", "o", parent_code="print(1/0)", parent_output=out)[1]["content"]
    assert "print(1/0)" in user and "MIDDLE" not in user and "characters trimmed" in user


def test_improve_prompt_shows_no_parent_output_unless_scores_are_switched_on():
    plain = render_prompt("improve", "d", "o", parent_code="fit()", parent_output="Validation metric: 0.51")
    shown = render_prompt(
        "improve", "d", "o", parent_code="fit()", parent_output="Validation metric: 0.51", show_scores=True
    )
    assert "fit()" in plain[1]["content"] and "0.51" not in plain[1]["content"]
    assert "0.51" in shown[1]["content"]


def test_improve_without_parent_code_and_unknown_mode_are_errors():
    with pytest.raises(ValueError):
        render_prompt("improve", "d", "o")
    with pytest.raises(ValueError):
        render_prompt("explore", "d", "o")


def test_custom_template_dir_overrides_one_template_and_keeps_the_rest(tmp_path):
    (tmp_path / "draft.md").write_text("CUSTOM {{ task_description }}")
    msgs = render_prompt("draft", "T", "o", template_dir=tmp_path)
    assert msgs[1]["content"] == "CUSTOM T" and "Kaggle grandmaster" in msgs[0]["content"]


def test_trim_output_keeps_head_and_tail_only_past_the_limit():
    assert trim_output("short") == "short"
    long = "a" * 2600 + "b" * 3000 + "c" * 2600
    t = trim_output(long)
    assert t.startswith("a" * 2500) and t.endswith("c" * 2500) and "b" * 100 not in t


def test_task_context_reads_description_and_summarises_a_public_folder(tmp_path):
    pub = tmp_path / "public" / "cactus-mini"
    (pub / "train").mkdir(parents=True)
    for i in range(20):
        (pub / "train" / f"{i:08x}.png").write_bytes(b"\x89PNG")
    (pub / "description.md").write_text("# Cactus\nFind the cactus.")
    (pub / "train.csv").write_text("id,has_cactus\n" + "".join(f"{i:08x}.png,{i % 2}\n" for i in range(20)))
    ctx = task_context("cactus-mini", [str(tmp_path / "public")], csv_head_lines=3)
    assert ctx.description.startswith("# Cactus")
    assert "train/ (20 files .png" in ctx.data_overview
    assert "`input/train.csv` (20 rows)" in ctx.data_overview and "00000001.png,1" in ctx.data_overview
    assert "00000002.png" not in ctx.data_overview.split("first lines:")[1]
    mle = tmp_path / "mle" / "spooky" / "prepared" / "public"
    mle.mkdir(parents=True)
    (mle / "description.md").write_text("spooky")
    assert task_context("spooky", [str(tmp_path / "mle")]).public_dir == mle
    with pytest.raises(FileNotFoundError):
        task_context("nope", [str(tmp_path)])
    assert data_overview(mle).startswith("```\ninput/")


def test_parse_splits_thinking_plan_and_code():
    text = "<think>\nuse tfidf\n</think>\nI will fit a TF-IDF model.\n\n```python\nimport os\nprint(1)\n```\n"
    p = parse_completion(text)
    assert (
        p.thinking == "use tfidf"
        and p.plan == "I will fit a TF-IDF model."
        and p.code == "import os\nprint(1)"
    )


def test_parse_without_code_gives_empty_code_and_the_text_as_plan():
    p = parse_completion("I would train a model but I forgot the code.")
    assert p.code == "" and p.plan.startswith("I would")


def test_parse_prefers_a_block_that_compiles_and_keeps_a_broken_one_for_the_real_syntax_error():
    two = "plan\n```python\ndef (:\n```\ntext\n```python\nx = 1\n```"
    assert parse_completion(two).code == "x = 1"
    broken = "plan\n```python\ndef (:\n```"
    assert parse_completion(broken).code == "def (:"


def test_parse_truncated_fence_counts_only_if_it_compiles():
    assert parse_completion("plan\n```python\nx = 1\ny = 2\n").code == "x = 1\ny = 2"
    assert parse_completion("plan\n```python\nfor i in range(\n").code == ""


def test_parse_unclosed_think_is_all_thinking():
    p = parse_completion("<think>still thinking about ```python\nx=1")
    assert p.code == "" and p.thinking.startswith("still thinking")


def test_task_context_falls_back_to_the_grader_registry_for_a_builtin_task(tmp_path, monkeypatch):
    monkeypatch.setenv("TREEGRPO_HOME", str(tmp_path))
    ctx = task_context("spooky-mini")  # not generated yet: the registry generates it
    assert ctx.public_dir == tmp_path / "tasks" / "public" / "spooky-mini"
    assert ctx.description.strip() and "train.csv" in ctx.data_overview and "private" not in ctx.data_overview


def test_the_resource_example_in_the_instructions_passes_the_executors_gate():
    import re

    from treegrpo_executor import parse_declaration
    from treegrpo_executor.config import GateSettings

    user = render_prompt("draft", "d", "o")[1]["content"]
    block = re.search(r"```python\n(# /// script.*?# ///)\n```", user, re.S).group(1)
    decl = parse_declaration(block + "\nprint(1)\n", GateSettings())
    assert decl.resources == {"cpu": 2, "mem": 4, "ephemeral": 2} and decl.miss_reason is None
