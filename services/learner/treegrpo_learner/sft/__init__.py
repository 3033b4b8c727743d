"""Supervised fine-tuning of the policy: the seed corpus (warm start) and rejection-sampling
fine-tuning from runs' event logs. `treegrpo sft` is the command; `prepare_demo_policy` is what
the embedded demo calls."""

from treegrpo_learner.sft._archive import (
    Member,
    ScoredGroup,
    archive_pairs,
    read_groups,
    select_nodes,
)
from treegrpo_learner.sft._corpus import CorpusScript, Verified, corpus_pairs, load_corpus
from treegrpo_learner.sft._demo import prepare_demo_policy
from treegrpo_learner.sft._pairs import Pair, make_pair, render_completion
from treegrpo_learner.sft._train import SftResult, train_sft
from treegrpo_learner.sft.config import ArchiveSettings, CorpusSettings, SftConfig

__all__ = [
    "ArchiveSettings",
    "CorpusScript",
    "CorpusSettings",
    "Member",
    "Pair",
    "ScoredGroup",
    "SftConfig",
    "SftResult",
    "Verified",
    "archive_pairs",
    "corpus_pairs",
    "load_corpus",
    "make_pair",
    "prepare_demo_policy",
    "read_groups",
    "render_completion",
    "select_nodes",
    "train_sft",
]
