"""Checkpoints: adapter, optimizer, RNG, version and stream position, written atomically.

Layout: `<dir>/step_000007/{adapter/, trainer.pt, state.json}` plus `<dir>/LATEST` naming the
newest. A checkpoint is built in a temporary sibling folder and renamed into place, then LATEST is
replaced (`os.replace`), so a crash at any instant leaves either the old or the new checkpoint,
never a half-written one.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch

log = logging.getLogger(__name__)
LATEST = "LATEST"


@dataclass
class LearnerState:
    """What must survive a crash besides the weights. `trained` is every group consumed so far
    (trained or dropped as stale), so a redelivered group is recognised and never trained twice."""

    run_id: str = ""
    step: int = 0            # steps done; the policy version is the step
    last_stream_seq: int = 0  # stream sequence of the newest group consumed
    trained: list[str] = field(default_factory=list)
    dropped_stale: int = 0
    record: dict = field(default_factory=dict)  # the last step's learner.step, to re-send after a crash

    @property
    def version(self) -> int:
        return self.step

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> LearnerState:
        return cls(**json.loads(text))


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def save(root: Path, state: LearnerState, model, trainer_state: dict, keep: int = 2) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    name = f"step_{state.step:06d}"
    final = root / name
    tmp = root / f".tmp-{name}-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    model.save_pretrained(tmp / "adapter")
    torch.save(trainer_state, tmp / "trainer.pt")
    (tmp / "state.json").write_text(state.to_json())
    for f in tmp.rglob("*"):
        if f.is_file():
            with open(f, "rb") as fh:
                os.fsync(fh.fileno())
    if final.exists():  # a re-run of the same step after a crash: replace it
        shutil.rmtree(final)
    os.rename(tmp, final)
    pointer = root / f".{LATEST}.tmp"
    pointer.write_text(name)
    os.replace(pointer, root / LATEST)
    _fsync_dir(root)
    _prune(root, keep)
    return final


def _prune(root: Path, keep: int) -> None:
    steps = sorted(p for p in root.glob("step_*") if p.is_dir())
    for old in steps[:-keep]:
        shutil.rmtree(old, ignore_errors=True)
    for tmp in root.glob(".tmp-step_*"):
        shutil.rmtree(tmp, ignore_errors=True)


def latest(root: Path) -> Path | None:
    pointer = root / LATEST
    if pointer.exists():
        path = root / pointer.read_text().strip()
        if (path / "state.json").exists():
            return path
    steps = sorted(p for p in root.glob("step_*") if (p / "state.json").exists())
    return steps[-1] if steps else None


def load(path: Path) -> tuple[LearnerState, dict, Path]:
    """(state, trainer state, adapter folder) of one checkpoint."""
    state = LearnerState.from_json((path / "state.json").read_text())
    trainer_state = torch.load(path / "trainer.pt", weights_only=False)
    return state, trainer_state, path / "adapter"


def load_adapter_weights(model, adapter_dir: Path) -> None:
    """Copy saved LoRA weights into the live (trainable) adapter."""
    from peft import set_peft_model_state_dict
    from safetensors.torch import load_file

    weights = load_file(str(adapter_dir / "adapter_model.safetensors"))
    result = set_peft_model_state_dict(model, weights)
    missing = [k for k in getattr(result, "unexpected_keys", []) if "lora" in k]
    if missing:
        raise ValueError(f"adapter weights do not match the model: {missing[:3]}")
    for p in model.parameters():
        if p.requires_grad and p.dtype != torch.float32:
            p.data = p.data.float()
