"""Checkpoints are verified before they are trusted: a manifest written last (size + sha256 of
every file) and the adapter's values. A damaged newest checkpoint is skipped with a reason, none
good is a permanent error, and non-finite weights are never saved (real peft adapters, real files).

Imports a private module: `treegrpo_learner._checkpoint`, `treegrpo_learner._distributed`,
`treegrpo_learner._model` (what these tests exercise is not on the package's public surface).
"""

from __future__ import annotations

import json
import struct

import pytest
import torch

from treegrpo.bus import file_sha256
from treegrpo_learner import _checkpoint as ckpt
from treegrpo_learner._model import tiny_qwen3, wrap_lora
from treegrpo_learner.config import LoraSettings

pytestmark = pytest.mark.timeout(120)


def saved(tmp_path, steps=(1, 2)):
    model = wrap_lora(tiny_qwen3(seed=0), LoraSettings(r=4, alpha=8))
    root = tmp_path / "ckpt"
    for step in steps:
        with torch.no_grad():
            for p in model.parameters():
                if p.requires_grad:
                    p.add_(0.01)
        ckpt.save(
            root, ckpt.LearnerState(run_id="r", step=step, trained=[f"g{step}"]), model, {"opt": step}, keep=2
        )
    return root, model


def adapter_file(root, step):
    return root / f"step_{step:06d}" / "adapter" / "adapter_model.safetensors"


def test_a_saved_checkpoint_carries_a_manifest_and_verifies(tmp_path):
    root, _ = saved(tmp_path)
    manifest = json.loads((root / "step_000002" / ckpt.MANIFEST).read_text())
    assert {"state.json", "trainer.pt", "adapter/adapter_model.safetensors"} <= set(manifest)
    assert ckpt.verify(root / "step_000002") == ""
    assert ckpt.newest_good(root) == (root / "step_000002", [])


def test_a_truncated_newest_checkpoint_is_skipped_for_the_one_before_it(tmp_path):
    root, _ = saved(tmp_path)
    f = adapter_file(root, 2)
    f.write_bytes(f.read_bytes()[: f.stat().st_size // 2])  # what a full disk or a crash can leave
    path, damaged = ckpt.newest_good(root)
    assert path == root / "step_000001"
    assert len(damaged) == 1 and "step_000002" in damaged[0] and "truncated" in damaged[0]
    state, trainer_state, _ = ckpt.load(path)
    assert state.step == 1 and trainer_state == {"opt": 1}


def test_overwritten_weights_with_an_intact_header_are_caught(tmp_path):
    root, _ = saved(tmp_path)
    f = adapter_file(root, 2)
    data = bytearray(f.read_bytes())
    header = 8 + struct.unpack("<Q", data[:8])[0]
    data[header:] = b"\xff" * (len(data) - header)  # NaN bit patterns, same size, header still parses
    f.write_bytes(bytes(data))
    path, damaged = ckpt.newest_good(root)
    assert path == root / "step_000001" and "sha256" in damaged[0]


def test_values_are_checked_even_when_the_manifest_agrees(tmp_path):
    root, _ = saved(tmp_path)
    f = adapter_file(root, 2)
    data = bytearray(f.read_bytes())
    header = 8 + struct.unpack("<Q", data[:8])[0]
    data[header : header + 4] = struct.pack("<f", float("nan"))
    f.write_bytes(bytes(data))
    manifest_path = root / "step_000002" / ckpt.MANIFEST
    manifest = json.loads(manifest_path.read_text())
    manifest["adapter/adapter_model.safetensors"]["sha256"] = file_sha256(f)  # as if saved that way
    manifest_path.write_text(json.dumps(manifest))
    _, damaged = ckpt.newest_good(root)
    assert "non-finite" in damaged[0]


def test_no_good_checkpoint_is_none_with_each_problem_named_for_the_rebuild_from_the_log(tmp_path):
    root, _ = saved(tmp_path)
    for step in (1, 2):
        adapter_file(root, step).write_bytes(b"\x00" * 10)
    path, damaged = ckpt.newest_good(root)
    assert path is None
    assert [d.split(":")[0] for d in damaged] == ["step_000002", "step_000001"]


def test_no_checkpoint_at_all_is_a_fresh_start_not_an_error(tmp_path):
    assert ckpt.newest_good(tmp_path / "none") == (None, [])


def test_non_finite_weights_are_never_saved(tmp_path):
    root, model = saved(tmp_path, steps=(1,))
    with torch.no_grad():
        next(p for p in model.parameters() if p.requires_grad).view(-1)[0] = float("inf")
    with pytest.raises(ckpt.NonFiniteWeights):
        ckpt.save(root, ckpt.LearnerState(run_id="r", step=2), model, {}, keep=2)
    assert ckpt.newest_good(root)[0] == root / "step_000001"


def test_a_sharded_learners_gathered_adapter_is_saved_and_checked_for_non_finite_values(tmp_path):
    from peft import get_peft_model_state_dict

    from treegrpo_learner._distributed import GatheredAdapter

    root, model = saved(tmp_path, steps=(1,))
    weights = {k: v.clone() for k, v in get_peft_model_state_dict(model).items()}
    ckpt.save(root, ckpt.LearnerState(run_id="r", step=2), GatheredAdapter(model, weights), {}, keep=2)
    assert ckpt.newest_good(root)[0] == root / "step_000002"
    next(iter(weights.values())).view(-1)[0] = float("nan")
    with pytest.raises(ckpt.NonFiniteWeights):
        ckpt.save(root, ckpt.LearnerState(run_id="r", step=3), GatheredAdapter(model, weights), {}, keep=2)
    assert ckpt.newest_good(root)[0] == root / "step_000002"
