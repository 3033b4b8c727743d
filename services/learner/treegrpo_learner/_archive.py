"""A version's adapter archive: the tar the learner publishes, pushes and resumes from.

The tar holds peft's `save_pretrained` folder at its root plus `treegrpo_state.json` (the learner
state after the step and the step's record), so any published version is also a point the learner
can resume from when its local checkpoint is older or gone. Its sha256 is taken as the tar is
written: the push needs it before the object store has the archive (`Publisher.publish`).
"""

from __future__ import annotations

import hashlib
import json
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path

from treegrpo.safetar import extract_data

STATE_FILE = "treegrpo_state.json"


@dataclass(frozen=True)
class Archive:
    path: Path
    sha256: str
    bytes: int


class _HashingWriter:
    """A write-only file for tarfile that hashes what goes through it."""

    def __init__(self, fh):
        self.fh, self.digest, self.written = fh, hashlib.sha256(), 0

    def write(self, data) -> int:
        self.digest.update(data)
        self.written += len(data)
        return self.fh.write(data)

    def tell(self) -> int:
        return self.written


def write_archive(model, extra: dict, dest: Path, dtype: str = "float32") -> Archive:
    """Tar of the adapter folder (files at the tar's root) with the learner's state beside it; the
    adapter's floating tensors in `dtype` (the trainer's float32 master weights, or bfloat16)."""
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        save_adapter(model, folder, dtype)
        (folder / STATE_FILE).write_text(json.dumps(extra))
        dest.parent.mkdir(parents=True, exist_ok=True)
        with open(dest, "wb") as raw:
            out = _HashingWriter(raw)
            with tarfile.open(fileobj=out, mode="w") as tar:
                for f in sorted(folder.iterdir()):
                    info = tar.gettarinfo(str(f), arcname=f.name)
                    info.mtime, info.uid, info.gid, info.uname, info.gname = 0, 0, 0, "", ""
                    with open(f, "rb") as fh:
                        tar.addfile(info, fh)
    return Archive(dest, out.digest.hexdigest(), out.written)


def save_adapter(adapter, folder: Path, dtype: str) -> None:
    """peft's adapter files of `adapter` (the live peft model or a `GatheredAdapter`) with its
    floating tensors in `dtype`. The cast happens in memory, on the adapter's device: no float32 file
    is written, read back and written again (benchmarks/publish_path.py: at the 9B adapter's size that
    was most of the archive's time on the 2-core machine)."""
    if dtype == "float32":
        adapter.save_pretrained(folder)
        return
    import torch

    from treegrpo_learner._distributed import GatheredAdapter, named_trainable

    if isinstance(adapter, GatheredAdapter):
        named = adapter.weights
    else:  # what the learner trains is the adapter: peft saves exactly these tensors
        named = {n: p.detach() for n, p in named_trainable(adapter)}
    if not named:  # nothing trainable (a frozen adapter): what peft saves, cast on disk
        adapter.save_pretrained(folder)
        cast_adapter(folder / "adapter_model.safetensors", dtype)
        return
    target = getattr(torch, dtype)
    cast = {k: v.to(target) if v.is_floating_point() else v for k, v in named.items()}
    adapter.save_pretrained(folder, state_dict=cast)


def cast_adapter(path: Path, dtype: str) -> None:
    """Rewrite a safetensors file with its floating tensors in `dtype` (keys, shapes, metadata kept)."""
    import torch
    from safetensors import safe_open
    from safetensors.torch import save_file

    target = getattr(torch, dtype)
    weights = {}
    with safe_open(str(path), "pt") as f:  # one open: the tensors and the metadata together
        metadata = f.metadata()
        for key in f.keys():
            t = f.get_tensor(key)
            weights[key] = t.to(target) if t.is_floating_point() else t
    save_file(weights, str(path), metadata=metadata)


def read_archive(archive: Path, folder: Path) -> dict:
    folder.mkdir(parents=True, exist_ok=True)
    extract_data(archive, folder)
    return json.loads((folder / STATE_FILE).read_text())


def write_version(model, extra: dict, outbox: Path, version: int, dtype: str) -> Archive:
    """Version `version`'s archive in `outbox` (`v<version>.tar`), the older ones removed: those
    written more than a second before it (a re-push of the same version rewrites its own)."""
    dest = outbox / f"v{version}.tar"
    archive = write_archive(model, extra, dest, dtype)
    for old in sorted(outbox.glob("v*.tar")):
        if old != dest and old.stat().st_mtime < dest.stat().st_mtime - 1:
            old.unlink(missing_ok=True)
    return archive
