"""Corpus pairs: rendered with the sampler's own prompts, completions the sampler's parser reads back."""

from __future__ import annotations

import pytest

from treegrpo.prompts import PromptSettings, render_prompt, task_context
from treegrpo.tasks import ensure_builtin_tasks
from treegrpo_learner.sft import CorpusSettings, corpus_pairs, load_corpus, render_completion
from treegrpo_sampler import parse_completion


@pytest.fixture
def spooky_home(tmp_path, monkeypatch):
    monkeypatch.setenv("TREEGRPO_HOME", str(tmp_path))
    ensure_builtin_tasks(tasks=["spooky-mini"])
    return tmp_path


def test_every_completion_parses_back_to_its_script():
    for s in load_corpus():
        parsed = parse_completion(render_completion(s.plan, s.code))
        assert parsed.code == s.code.rstrip("\n") and parsed.plan == s.plan


def test_corpus_has_varied_valid_and_failing_scripts_for_every_task():
    scripts = load_corpus()
    for task in ("spooky-mini", "cactus-mini", "plant-mini", "dogscats-mini"):
        mine = [s for s in scripts if s.task == task]
        valid = [s for s in mine if s.intended == "ok"]
        failing = [s for s in mine if s.intended != "ok"]
        assert len(valid) >= 20 and len(failing) >= 6
        assert {s.intended for s in failing} >= {"crashed", "no_submission", "invalid_submission"}
        assert all(s.fixes in {v.name for v in valid} for s in failing)
        assert all(s.code.startswith("# /// script\n") and "[tool.resources]" in s.code for s in mine)


def test_pairs_use_the_samplers_exact_prompts_and_real_error_output(spooky_home):
    prompts = PromptSettings()
    pairs = corpus_pairs(CorpusSettings(tasks=["spooky-mini"]), prompts)
    modes = {p.mode for p in pairs}
    assert modes == {"draft", "improve", "debug"}
    ctx = task_context("spooky-mini")
    draft = next(p for p in pairs if p.mode == "draft")
    assert draft.messages == render_prompt("draft", ctx.description, ctx.data_overview)
    by_name = {s.name: s for s in load_corpus() if s.task == "spooky-mini"}
    for p in pairs:
        if p.mode == "debug":
            broken, fixed = (by_name[x] for x in p.source.split(":")[1].split("->"))
            assert broken.verified.status != "ok" and fixed.verified.status == "ok"
            assert broken.code.strip() in p.messages[1]["content"]
            assert broken.verified.output.strip().splitlines()[-1] in p.messages[1]["content"]
            assert parse_completion(p.completion).code == fixed.code.rstrip("\n")
        if p.mode == "improve":
            parent, child = (by_name[x] for x in p.source.split(":")[1].split("->"))
            assert parent.verified.oriented < child.verified.oriented


def test_a_score_spread_subset_keeps_the_weakest_and_the_best_and_debug_follows_it(spooky_home):
    valid = [s for s in load_corpus() if s.task == "spooky-mini" and s.intended == "ok"]
    ranked = sorted(valid, key=lambda s: s.verified.oriented)
    pairs = corpus_pairs(
        CorpusSettings(tasks=["spooky-mini"], valid_per_task=5, draft_repeats=1), PromptSettings()
    )
    drafts = {p.source.split(":")[1].removesuffix(".py") for p in pairs if p.mode == "draft"}
    assert len(drafts) == 5 and {ranked[0].name, ranked[-1].name} <= drafts
    for p in pairs:
        if p.mode != "draft":
            assert p.source.split("->")[1] in drafts  # every target is a kept script


def test_grouped_improve_pairs_share_few_parents_each_with_better_children(spooky_home):
    pairs = corpus_pairs(
        CorpusSettings(tasks=["spooky-mini"], improve_parents=3, improve_children=4, debug=False),
        PromptSettings(),
    )
    by_name = {s.name: s for s in load_corpus() if s.task == "spooky-mini"}
    improve = [p for p in pairs if p.mode == "improve"]
    parents = {p.source.split(":")[1].split("->")[0] for p in improve}
    assert len(parents) == 3 and len(improve) == 12
    assert len({p.prompt_messages for p in improve}) == 3  # one prompt per parent
    for p in improve:
        parent, child = (by_name[x] for x in p.source.split(":")[1].split("->"))
        assert parent.verified.oriented < child.verified.oriented
