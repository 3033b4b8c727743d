"""A colocated learner's allocator and waits, off a GPU (the waits never block without CUDA).

Imports a private module: `treegrpo_learner._colocate` (what these tests exercise is not on the
package's public surface).
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from treegrpo_learner import _colocate

pytestmark = pytest.mark.timeout(10)
EXAMPLES = Path(__file__).resolve().parents[2] / "treegrpo" / "examples"


def test_a_colocated_learner_starts_cuda_with_expandable_segments(monkeypatch):
    monkeypatch.delenv("PYTORCH_CUDA_ALLOC_CONF", raising=False)
    assert _colocate.prepare_allocator(True)
    import os

    assert os.environ["PYTORCH_CUDA_ALLOC_CONF"] == "expandable_segments:True"


def test_the_allocator_is_left_as_the_environment_or_the_config_says(monkeypatch):
    monkeypatch.setenv("PYTORCH_CUDA_ALLOC_CONF", "max_split_size_mb:128")
    assert not _colocate.prepare_allocator(True)
    monkeypatch.delenv("PYTORCH_CUDA_ALLOC_CONF")
    assert not _colocate.prepare_allocator(False)
    import os

    assert "PYTORCH_CUDA_ALLOC_CONF" not in os.environ


def test_off_cuda_nothing_waits_and_nothing_is_released():
    assert asyncio.run(_colocate.wait_for_memory("cpu", 75.0, 1.0)) == 0.0
    assert asyncio.run(_colocate.wait_for_engine("cpu", 60.0, 1.0, 1.0)) == 0.0
    assert _colocate.release("cpu") is None


def test_the_seed_presets_release_after_each_step_with_expandable_segments():
    from treegrpo.runner import load_run_file

    for preset in ("seed-qwen35-9b-h200.toml", "seed-qwen36-27b-h200.toml", "seed-qwen35-9b-h100.toml"):
        rf = load_run_file(EXAMPLES / preset)
        learner = rf.service("learner")
        assert learner.colocate.release_after_step and learner.colocate.expandable_segments
        assert learner.colocate.min_free_gib > 0


def test_a_colocated_wait_that_could_never_end_is_refused_with_the_numbers():
    # the 9B H200 preset on an H100 (2026-12-07): 75 GiB free wanted beside the learner's own 18
    why = _colocate.unreachable(79.2, 18.0, 0.0, 75.0)
    assert "min_free_gib = 75 can never be free on a 79.2 GiB device where the learner holds 18.0" in why
    assert "set it below 61" in why
    assert "engine_gib = 140 is more than the device's 79.2 GiB" in _colocate.unreachable(
        79.2, 0.0, 140.0, 0.0
    )
    assert _colocate.unreachable(139.8, 18.0, 60.0, 75.0) == ""  # the same preset on its H200
    assert _colocate.unreachable(79.2, 18.0, 30.0, 40.0) == ""
    _colocate.check_reachable("cpu", 1e9, 1e9)  # off CUDA nothing waits, so nothing is refused


def test_the_9b_preset_for_an_80_gb_card_is_the_h200_one_with_a_checkpointed_step_that_fits_it():
    from treegrpo.runner import load_run_file

    h200, h100 = (load_run_file(EXAMPLES / f"seed-qwen35-9b-{card}.toml") for card in ("h200", "h100"))
    small, large = h100.service("learner"), h200.service("learner")
    assert small.packing.gradient_checkpointing and not large.packing.gradient_checkpointing
    # measured on one H100 (2026-12-07): 79.2 GiB, the learner holding 18.2 between steps
    assert _colocate.unreachable(79.2, 18.2, small.colocate.engine_gib, small.colocate.min_free_gib) == ""
    assert _colocate.unreachable(79.2, 18.2, large.colocate.engine_gib, large.colocate.min_free_gib)
    # the sleeping engine is what makes room: awake it holds 0.5 x 79.2 beside the learner's 18.2
    assert small.colocate.min_free_gib > 79.2 - 0.5 * 79.2 - 18.2
    # nothing else differs: the tree, the sampler and the rest of the learner are the seed's
    assert h100.run == h200.run and h100.service("sampler") == h200.service("sampler")
    same = {"packing", "colocate"}
    assert small.model_dump(exclude=same) == large.model_dump(exclude=same)
