"""Gathering pairs from the configured sources, resolving folders, and the demo policy."""

from __future__ import annotations

from pathlib import Path

from treegrpo.config import treegrpo_home
from treegrpo_learner.sft._pairs import Pair
from treegrpo_learner.sft.config import SftConfig


def resolve_paths(cfg: SftConfig) -> tuple[Path, Path]:
    model = Path(cfg.model).expanduser() if cfg.model else treegrpo_home() / "models" / "small"
    out = Path(cfg.out_dir).expanduser() if cfg.out_dir else treegrpo_home() / "models" / "sft"
    if not (model / "config.json").is_file():
        raise FileNotFoundError(f"{model} holds no model; build one with `treegrpo model init`")
    return model, out


async def build_pairs(cfg: SftConfig, use_corpus: bool, console=None) -> list[Pair]:
    """Corpus pairs (when asked) then archive pairs of every configured run."""
    pairs: list[Pair] = []
    if use_corpus:
        from treegrpo.tasks import ensure_builtin_tasks
        from treegrpo_learner.sft._corpus import corpus_pairs, load_corpus

        tasks = cfg.corpus.tasks or sorted({s.task for s in load_corpus(cfg.corpus.path)})
        if not cfg.prompts.task_roots:
            ensure_builtin_tasks(tasks=tasks)  # the prompts show each task's real public folder
        pairs += corpus_pairs(cfg.corpus, cfg.prompts, cfg.seed)
    if cfg.archive.runs:
        from treegrpo.bus import Bus
        from treegrpo.nats_url import resolve_nats_url
        from treegrpo_learner.sft._archive import archive_pairs

        bus = await Bus.connect(resolve_nats_url(cfg.nats.url), "sft", timeout_s=cfg.nats.connect_timeout_s)
        try:
            found, missing = await archive_pairs(bus, cfg.archive)
        finally:
            await bus.close(cfg.nats.drain_timeout_s)
        if missing and console is not None:
            console.print(f"[yellow]{len(missing)} selected nodes have no node.sampled event; skipped[/]")
        pairs += found
    return pairs
