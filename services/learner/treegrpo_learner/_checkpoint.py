"""Checkpoints: adapter, optimizer, RNG, version and stream position, written atomically and verified.

Layout: `<dir>/step_000007/{adapter/, trainer.pt, state.json, MANIFEST.json}` plus `<dir>/LATEST`
naming the newest. A checkpoint is built in a temporary sibling folder and renamed into place, then
LATEST is replaced (`os.replace`), so a crash at any instant leaves either the old or the new
checkpoint, never a half-written one. That protects against our own crash, not against the disk:
a full disk, a bad block or a stray write can still damage files afterwards. So `MANIFEST.json`
(size and sha256 of every other file) is written last, and `newest_good` checks it, and the
adapter's values, before anything is loaded: a damaged newest checkpoint is reported and the one
before it used. Checkpoints are a cache of the log: with none good the learner rebuilds its state
from the published adapters and the recorded steps (`_restore.py`).
"""

from __future__ import annotations

import json
import logging
import os
import shutil
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch

from treegrpo.bus import PermanentError, file_sha256
from treegrpo.finite import nonfinite_in_folder, nonfinite_in_tensors

log = logging.getLogger(__name__)
LATEST = "LATEST"
MANIFEST = "MANIFEST.json"


class CheckpointError(PermanentError):
    """The learner's state cannot be restored (another run's checkpoints, or nothing in the log to
    rebuild it from): restarting cannot help, a person must look."""


class NonFiniteWeights(ValueError):  # noqa: N818 (a fact about the weights, raised as an error)
    """The adapter holds NaN/inf: never saved, never published."""


@dataclass
class LearnerState:
    """What must survive a crash besides the weights. `trained` is every group consumed so far
    (trained or dropped as stale), so a redelivered group is recognised and never trained twice."""

    run_id: str = ""
    step: int = 0  # steps done; the policy version is the step
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


def _trainable(model):
    """The adapter's weights: a peft model's trainable parameters, or a sharded learner's gathered
    copy (`GatheredAdapter.trainable_tensors`)."""
    if hasattr(model, "trainable_tensors"):
        return model.trainable_tensors()
    return (p for p in model.parameters() if p.requires_grad)


def save(root: Path, state: LearnerState, model, trainer_state: dict, keep: int = 2) -> Path:
    bad = nonfinite_in_tensors(_trainable(model))
    if bad:
        raise NonFiniteWeights(f"step {state.step}: the adapter holds {bad} non-finite values; not saved")
    root.mkdir(parents=True, exist_ok=True)
    name = f"step_{state.step:06d}"
    final = root / name
    tmp = root / f".tmp-{name}-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    model.save_pretrained(tmp / "adapter")
    torch.save(trainer_state, tmp / "trainer.pt")
    (tmp / "state.json").write_text(state.to_json())
    _fsync_files(tmp)
    manifest = {
        str(f.relative_to(tmp)): {"bytes": f.stat().st_size, "sha256": file_sha256(f)}
        for f in sorted(tmp.rglob("*"))
        if f.is_file()
    }
    (tmp / MANIFEST).write_text(
        json.dumps(manifest, indent=1, sort_keys=True)
    )  # last: it vouches for the rest
    _fsync_files(tmp, only=MANIFEST)
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
    for old in steps[:-keep]:  # the kept ones are the fallback if the newest is damaged later
        shutil.rmtree(old, ignore_errors=True)
    for tmp in root.glob(".tmp-step_*"):
        shutil.rmtree(tmp, ignore_errors=True)


def _fsync_files(folder: Path, only: str = "") -> None:
    for f in folder.rglob(only or "*"):
        if f.is_file():
            with open(f, "rb") as fh:
                os.fsync(fh.fileno())


def latest(root: Path) -> Path | None:
    """The newest checkpoint folder by name (unverified; `newest_good` is what restores use)."""
    pointer = root / LATEST
    if pointer.exists():
        path = root / pointer.read_text().strip()
        if (path / "state.json").exists():
            return path
    steps = sorted(p for p in root.glob("step_*") if (p / "state.json").exists())
    return steps[-1] if steps else None


def verify(path: Path) -> str:
    """Why this checkpoint cannot be trusted ('' = it verifies): its manifest, then its values."""
    manifest_path = path / MANIFEST
    try:
        manifest = json.loads(manifest_path.read_text())
    except FileNotFoundError:  # saved before manifests existed: its values are all we can check
        log.warning("%s has no %s; checking its adapter's values only", path.name, MANIFEST)
        manifest = {}
    except (OSError, ValueError) as exc:
        return f"{path.name}: unreadable {MANIFEST}: {exc}"
    for rel, want in manifest.items():
        f = path / rel
        if not f.is_file():
            return f"{path.name}: {rel} is missing"
        if f.stat().st_size != want["bytes"]:
            return (
                f"{path.name}: {rel} has {f.stat().st_size} bytes, "
                f"the manifest says {want['bytes']} (truncated?)"
            )
        if file_sha256(f) != want["sha256"]:
            return f"{path.name}: {rel} does not match its sha256 in the manifest (overwritten?)"
    try:
        bad = nonfinite_in_folder(path / "adapter")
    except Exception as exc:  # a file that hashes right but does not parse: damaged before the save
        return f"{path.name}: adapter unreadable: {type(exc).__name__}: {exc}"
    if bad:
        return f"{path.name}: adapter holds {sum(bad.values())} non-finite values"
    return ""


def newest_good(root: Path) -> tuple[Path | None, list[str]]:
    """The newest checkpoint that verifies (None: none does, or none exists), and what was wrong
    with each newer one."""
    steps = sorted((p for p in root.glob("step_*") if p.is_dir()), reverse=True)
    problems = []
    for path in steps:
        why = verify(path)
        if not why:
            return path, problems
        problems.append(why)
    return None, problems


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
