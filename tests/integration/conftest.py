"""Fixtures several integration modules share: a tiny local model and a one-task public tree."""

from __future__ import annotations

import pytest

from treegrpo.models import build_model


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return build_model(
        tmp_path_factory.mktemp("model") / "tiny", size="tiny", vocab_size=1024, tokenizer_bytes=1 << 20
    )


@pytest.fixture
def public(tmp_path):
    root = tmp_path / "public"
    task = root / "spooky-mini"
    task.mkdir(parents=True)
    (task / "description.md").write_text("# Spooky mini\nPredict the author of each sentence. Log loss.")
    (task / "train.csv").write_text("id,text,author\nid1,It was dark.,EAP\nid2,The thing.,HPL\n")
    return root
