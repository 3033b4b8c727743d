"""Built-in offline tasks: four small tasks generated deterministically into a cache folder.

`$TREEGRPO_HOME/tasks/public/<task>/` is what the agent's script sees as `./input/`;
`$TREEGRPO_HOME/tasks/private/<task>/answers.csv` is read by the grader alone (the private tree is
mode 0700, its files 0600). Layouts are the ones agreed in docs/BUILTIN_TASKS.md.

Generation is a pure function of (task, seed, GENERATOR_VERSION): the same inputs give
byte-identical files. It runs once; a stamp file records what the cache holds.
"""

from __future__ import annotations

import io
import logging
import os
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from PIL import Image

from treegrpo.config import treegrpo_home
from treegrpo.tasks import _descriptions as desc
from treegrpo.tasks import _gen_images as gi
from treegrpo.tasks import _gen_text
from treegrpo.tasks._task import COMPETITIONS, Grading, Task, task_from_spec

log = logging.getLogger(__name__)

GENERATOR_VERSION = 1
DEFAULT_SEED = 0
ANSWERS = "answers.csv"


@dataclass(frozen=True)
class BuiltinSpec:
    id: str
    name: str
    mirrors: str
    description: str
    index: int  # stream of the seed this task draws from (tasks are independent)
    grading: Grading = "metric"  # "completion_bytes": a load task (treegrpo/tasks/_load.py)


BUILTINS: dict[str, BuiltinSpec] = {
    b.id: b
    for b in (
        BuiltinSpec(
            "spooky-mini",
            "Spooky Author Identification (mini)",
            "spooky-author-identification",
            desc.SPOOKY,
            0,
        ),
        BuiltinSpec(
            "cactus-mini",
            "Aerial Cactus Identification (mini)",
            "aerial-cactus-identification",
            desc.CACTUS,
            1,
        ),
        BuiltinSpec("plant-mini", "Plant Pathology (mini)", "plant-pathology-2020-fgvc7", desc.PLANT, 2),
        BuiltinSpec(
            "dogscats-mini", "Dogs vs. Cats (mini)", "dogs-vs-cats-redux-kernels-edition", desc.DOGSCATS, 3
        ),
        # a systems load task: spooky-mini's data and description (stream 0: the same bytes), so the
        # sampler and executor do a real task's work, but each node's score comes from its completion's
        # bytes, so random-weight models still give groups with variance (docs/BUILTIN_TASKS.md)
        BuiltinSpec(
            "load-bytes",
            "Systems load: scores from completion bytes (spooky-mini data)",
            "spooky-author-identification",
            desc.SPOOKY,
            0,
            "completion_bytes",
        ),
    )
}
LEARNING_BUILTINS = tuple(t for t, b in BUILTINS.items() if b.grading == "metric")
LOAD_TASKS = frozenset(t for t, b in BUILTINS.items() if b.grading == "completion_bytes")


def _png(path: Path, arr: np.ndarray) -> None:
    buf = io.BytesIO()
    Image.fromarray(arr, "RGB").save(buf, format="PNG", compress_level=1)
    path.write_bytes(buf.getvalue())


def _csv(path: Path, frame: pd.DataFrame) -> None:
    path.write_text(frame.to_csv(index=False, lineterminator="\n"))


def _write_spooky(rng: np.random.Generator, pub: Path) -> pd.DataFrame:
    frames = _gen_text.generate(rng)
    for name in ("train.csv", "test.csv", "sample_submission.csv"):
        _csv(pub / name, frames[name])
    return frames["answers.csv"]


def _write_cactus(
    rng: np.random.Generator, pub: Path, n_train: int = 1500, n_test: int = 500
) -> pd.DataFrame:
    n = n_train + n_test
    labels = (rng.random(n) < 0.75).astype(int)
    ids = [f"{v:08x}.png" for v in rng.choice(2**32, size=n, replace=False)]
    for sub in ("train", "test"):
        (pub / sub).mkdir()
    for i in range(n):
        _png(pub / ("train" if i < n_train else "test") / ids[i], gi.cactus_scene(rng, bool(labels[i])))
    _csv(pub / "train.csv", pd.DataFrame({"id": ids[:n_train], "has_cactus": labels[:n_train]}))
    _csv(pub / "sample_submission.csv", pd.DataFrame({"id": ids[n_train:], "has_cactus": 0.5}))
    return pd.DataFrame({"id": ids[n_train:], "has_cactus": labels[n_train:]})


def _write_plant(rng: np.random.Generator, pub: Path, n_train: int = 1200, n_test: int = 400) -> pd.DataFrame:
    labels = rng.choice(len(gi.PLANT_LABELS), size=n_train + n_test, p=gi.PLANT_SHARE)
    (pub / "images").mkdir()
    ids = [f"Train_{i}" for i in range(n_train)] + [f"Test_{i}" for i in range(n_test)]
    for image_id, label in zip(ids, labels, strict=True):
        _png(pub / "images" / f"{image_id}.png", gi.plant_scene(rng, int(label)))
    onehot = pd.DataFrame({"image_id": ids})
    for k, name in enumerate(gi.PLANT_LABELS):
        onehot[name] = (labels == k).astype(int)
    _csv(pub / "train.csv", onehot.iloc[:n_train])
    _csv(pub / "test.csv", onehot.iloc[n_train:][["image_id"]])
    sample = onehot.iloc[n_train:][["image_id"]].assign(**{c: 0.25 for c in gi.PLANT_LABELS})
    _csv(pub / "sample_submission.csv", sample)
    return onehot.iloc[n_train:].reset_index(drop=True)


def _write_dogscats(
    rng: np.random.Generator, pub: Path, n_train: int = 1500, n_test: int = 500
) -> pd.DataFrame:
    labels = (rng.random(n_train + n_test) < 0.5).astype(int)
    for sub in ("train", "test"):
        (pub / sub).mkdir()
    counts = {0: 0, 1: 0}
    for i in range(n_train):
        kind = int(labels[i])
        _png(pub / "train" / f"{'dog' if kind else 'cat'}.{counts[kind]}.png", gi.pet_scene(rng, bool(kind)))
        counts[kind] += 1
    test_labels = labels[n_train:]
    for j, kind in enumerate(test_labels, start=1):
        _png(pub / "test" / f"{j}.png", gi.pet_scene(rng, bool(kind)))
    ids = list(range(1, n_test + 1))
    _csv(pub / "sample_submission.csv", pd.DataFrame({"id": ids, "label": 0.5}))
    return pd.DataFrame({"id": ids, "label": test_labels})


WRITERS: dict[str, Callable[[np.random.Generator, Path], pd.DataFrame]] = {
    "spooky-mini": _write_spooky,
    "cactus-mini": _write_cactus,
    "plant-mini": _write_plant,
    "dogscats-mini": _write_dogscats,
    "load-bytes": _write_spooky,
}


def generate_task(task_id: str, public_dir: Path, private_dir: Path | None, seed: int = DEFAULT_SEED) -> None:
    """Write one task's public and (unless None) private folders; neither may exist yet.

    Bump GENERATOR_VERSION whenever the output for a given seed changes: caches are keyed by it."""
    spec = BUILTINS[task_id]
    rng = np.random.default_rng([seed, spec.index, GENERATOR_VERSION])
    public_dir.mkdir(parents=True)
    answers = WRITERS[task_id](rng, public_dir)
    (public_dir / "description.md").write_text(spec.description)
    if private_dir is not None:
        private_dir.mkdir(parents=True, mode=0o700)
        _csv(private_dir / ANSWERS, answers)
        os.chmod(private_dir / ANSWERS, 0o600)
        os.chmod(private_dir, 0o700)


def builtin_task(task_id: str, home: Path | None = None) -> Task:
    """The Task of a built-in (without generating it; see `ensure_builtin_tasks`)."""
    spec = BUILTINS[task_id]
    root = (home or treegrpo_home()) / "tasks"
    return task_from_spec(
        task_id,
        spec.name,
        spec.description,
        root / "public" / task_id,
        root / "private" / task_id,
        COMPETITIONS[spec.mirrors],
        "builtin",
        ANSWERS,
        spec.grading,
    )


def _stamp(task_id: str, seed: int, private: bool) -> str:
    sides = "public+private" if private else "public"
    return f"{task_id} generator=v{GENERATOR_VERSION} seed={seed} {sides}\n"


def ensure_builtin_tasks(
    home: Path | None = None, seed: int = DEFAULT_SEED, tasks: list[str] | None = None, private: bool = True
) -> dict[str, Task]:
    """Generate the built-in tasks into `$TREEGRPO_HOME/tasks/` unless already there; return them.
    `tasks=None` means the four learning tasks: the load task (`load-bytes`) only when named.

    `private=False` writes only the public folders (e.g. on an executor host that must never hold
    answers); the data are the same, generation being deterministic. Safe against concurrent
    callers: each task is built in a scratch folder and moved into place with a rename; a stamp
    (`tasks/.stamps/<task>`) written last marks it complete."""
    root = (home or treegrpo_home()) / "tasks"
    subs = [("public", 0o755), (".stamps", 0o755)] + ([("private", 0o700)] if private else [])
    for sub, mode in subs:
        (root / sub).mkdir(parents=True, exist_ok=True)
        os.chmod(root / sub, mode)
    out: dict[str, Task] = {}
    for task_id in tasks or list(LEARNING_BUILTINS):
        stamp = root / ".stamps" / task_id
        have = stamp.read_text() if stamp.exists() else ""
        if have not in {_stamp(task_id, seed, private), _stamp(task_id, seed, True)}:
            log.info("generating built-in task %s (seed %d) into %s", task_id, seed, root)
            _build_into_place(root, task_id, seed, private)
            stamp.write_text(_stamp(task_id, seed, private))
        out[task_id] = builtin_task(task_id, root.parent)
    return out


def _build_into_place(root: Path, task_id: str, seed: int, private: bool) -> None:
    """Each side is generated in a scratch folder inside its own side's folder, so its rename into
    place never crosses file systems: public/ and private/ may be different volumes (compose mounts
    them apart, so that the executor can be given the public one alone)."""
    sides = ("private", "public") if private else ("public",)  # answers first: public implies answers
    scratch = {side: Path(tempfile.mkdtemp(prefix=f".build-{task_id}-", dir=root / side)) for side in sides}
    try:
        generate_task(
            task_id, scratch["public"] / "task", scratch["private"] / "task" if private else None, seed
        )
        for side in sides:
            target = root / side / task_id
            if target.exists():
                shutil.rmtree(target)
            os.replace(scratch[side] / "task", target)
    finally:
        for folder in scratch.values():
            shutil.rmtree(folder, ignore_errors=True)
