"""The seed corpus (manifest.json + <task>/*.py, the learner's package data in
treegrpo_learner/sft/corpus/, written by scripts/sft_corpus/generate.py) and its SFT pairs.

Pairs are rendered with the sampler's own prompt templates (`render_prompt`) and the task's real
public folder (`task_context`), so a pair's prompt is byte for byte what the sampler would serve:
- draft: the draft prompt -> a valid script;
- improve: the improve prompt with a weaker valid script of the same task -> a better one;
- debug: the debug prompt with a failing script and its real error output -> the fixed script.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from treegrpo.events import Status
from treegrpo.prompts import PromptSettings
from treegrpo_learner.sft._pairs import Pair, make_pair, render_completion
from treegrpo_learner.sft.config import CorpusSettings


@dataclass(frozen=True)
class Verified:
    status: str  # the grader's final status on the generated data
    test_metric: float | None
    oriented: float | None  # higher is better
    exc_type: str | None
    output: str  # tail of the script's stdout+stderr
    seconds: float


@dataclass(frozen=True)
class CorpusScript:
    task: str
    name: str
    file: Path
    plan: str
    intended: str
    fixes: str
    verified: Verified | None

    @property
    def code(self) -> str:
        return self.file.read_text()

    @property
    def usable(self) -> bool:
        """Verified, and the verification agrees with what the script was written to do."""
        return self.verified is not None and self.verified.status == self.intended


def packaged_corpus() -> Path:
    """The corpus shipped with the learner, found through importlib.resources (from an installed
    wheel as from the checkout). A wheel installs as plain files, so it is a real folder."""
    return Path(str(resources.files("treegrpo_learner.sft") / "corpus"))


def corpus_dir(path: str | Path = "") -> Path:
    """`path`, or the packaged corpus when it is empty."""
    return Path(path).expanduser() if path else packaged_corpus()


def load_corpus(path: str | Path = "") -> list[CorpusScript]:
    root = corpus_dir(path)
    data = json.loads((root / "manifest.json").read_text())
    out = []
    for e in data["scripts"]:
        v = e.get("verified")
        out.append(
            CorpusScript(
                e["task"],
                e["name"],
                root / e["file"],
                e["plan"],
                e["intended"],
                e["fixes"],
                Verified(**v) if v else None,
            )
        )
    return out


def corpus_pairs(settings: CorpusSettings, prompts: PromptSettings, seed: int = 0) -> list[Pair]:
    """Every pair the settings ask for, in a deterministic order."""
    from treegrpo.prompts import render_prompt, task_context

    scripts = load_corpus(settings.path)
    if settings.tasks:
        scripts = [s for s in scripts if s.task in settings.tasks]
    if settings.require_verified:
        scripts = [s for s in scripts if s.usable]
    rng = random.Random(seed)
    kw = dict(
        gpu_hint=prompts.gpu_hint,
        show_scores=prompts.show_scores,
        time_limit_s=prompts.time_limit_s,
        template_dir=prompts.template_dir or None,
    )
    pairs: list[Pair] = []
    for task in sorted({s.task for s in scripts}):
        ctx = task_context(task, prompts.task_roots or None, prompts.csv_head_lines)
        mine = [s for s in scripts if s.task == task]
        valid = spread([s for s in mine if s.intended == Status.OK], settings.valid_per_task)
        by_name = {s.name: s for s in valid}
        for s in valid:
            if settings.draft:
                msgs = render_prompt("draft", ctx.description, ctx.data_overview, **kw)
                pairs += [
                    make_pair(msgs, render_completion(s.plan, s.code), task, "draft", f"corpus:{s.file.name}")
                ] * settings.draft_repeats
        for parent, child in _improvements(valid, settings, rng):
            msgs = render_prompt(
                "improve",
                ctx.description,
                ctx.data_overview,
                parent.code,
                parent.verified.output if parent.verified else "",
                **kw,
            )
            pairs.append(
                make_pair(
                    msgs,
                    render_completion(child.plan, child.code),
                    task,
                    "improve",
                    f"corpus:{parent.name}->{child.name}",
                )
            )
        if settings.debug:
            for s in mine:
                fixed = by_name.get(s.fixes)
                if s.intended == Status.OK or fixed is None or s.verified is None:
                    continue
                msgs = render_prompt(
                    "debug", ctx.description, ctx.data_overview, s.code, s.verified.output, **kw
                )
                pairs.append(
                    make_pair(
                        msgs,
                        render_completion(fixed.plan, fixed.code),
                        task,
                        "debug",
                        f"corpus:{s.name}->{fixed.name}",
                    )
                )
    return pairs


def spread(valid: list[CorpusScript], k: int) -> list[CorpusScript]:
    """k of the valid scripts evenly spaced over their verified scores (weakest and best kept),
    so a smaller corpus still spans the quality range that gives GRPO its signal."""
    if k == 0 or len(valid) <= k:
        return valid
    ranked = sorted(
        valid,
        key=lambda s: (
            s.verified.oriented if s.verified and s.verified.oriented is not None else float("-inf"),
            s.name,
        ),
    )
    picks = sorted({round(i * (len(ranked) - 1) / max(1, k - 1)) for i in range(k)})
    return sorted((ranked[i] for i in picks), key=lambda s: s.name)


def _improvements(
    valid: list[CorpusScript], settings: CorpusSettings, rng: random.Random
) -> list[tuple[CorpusScript, CorpusScript]]:
    """(parent, better child) pairs of one task: k weaker parents per script, or, with
    improve_parents, a few parents each with several better children (one shared prompt each)."""
    if not settings.improve_parents:
        return [(parent, s) for s in valid for parent in _weaker(s, valid, settings.improve_per_script, rng)]
    scored = [s for s in valid if s.verified and s.verified.oriented is not None]
    better = {
        s.name: sorted((t for t in scored if t.verified.oriented > s.verified.oriented), key=lambda t: t.name)
        for s in scored
    }
    k = settings.improve_children
    # parents spread over the scripts with at least k better ones (the top k could only improve on each other)
    parents = spread([s for s in scored if len(better[s.name]) >= k], settings.improve_parents)
    return [(parent, child) for parent in parents for child in rng.sample(better[parent.name], k)]


def _weaker(
    script: CorpusScript, valid: list[CorpusScript], k: int, rng: random.Random
) -> list[CorpusScript]:
    """Up to k valid scripts of the same task that score strictly worse than `script`."""
    if k == 0 or script.verified is None or script.verified.oriented is None:
        return []
    mine = script.verified.oriented
    worse = [
        v for v in valid if v.verified and v.verified.oriented is not None and v.verified.oriented < mine
    ]
    worse.sort(key=lambda v: v.name)
    return rng.sample(worse, min(k, len(worse)))
