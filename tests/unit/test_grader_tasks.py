"""The built-in offline tasks: agreed layouts, determinism, the private tree, a learnable signal.

Imports a private module: `treegrpo.tasks._builtin` (what these tests exercise is not on the package's
public surface).
"""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from PIL import Image

from treegrpo.tasks import LEARNING_BUILTINS, ensure_builtin_tasks, get_task, grade_submission

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def home(tmp_path_factory) -> Path:
    h = tmp_path_factory.mktemp("home")
    ensure_builtin_tasks(h)
    return h


def files_of(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_two_generations_are_byte_identical(home, tmp_path):
    ensure_builtin_tasks(tmp_path)
    for side in ("public", "private"):
        a, b = files_of(home / "tasks" / side), files_of(tmp_path / "tasks" / side)
        assert a.keys() == b.keys() and len(a) >= (5600 if side == "public" else 4)
        assert all(a[k] == b[k] for k in a), f"{side} differs"


def test_public_only_generation_writes_the_same_public_files_and_no_answers(home, tmp_path):
    ensure_builtin_tasks(tmp_path, tasks=["spooky-mini"], private=False)
    assert not (tmp_path / "tasks/private").exists()
    pub = "tasks/public/spooky-mini"
    assert files_of(tmp_path / pub) == files_of(home / pub)
    ensure_builtin_tasks(tmp_path, tasks=["spooky-mini"])  # the grader's side later adds the answers
    assert (tmp_path / "tasks/private/spooky-mini/answers.csv").read_bytes() == (
        home / "tasks/private/spooky-mini/answers.csv"
    ).read_bytes()


def test_each_side_moves_into_place_within_its_own_folder_so_they_may_be_separate_volumes(
    tmp_path, monkeypatch
):
    import treegrpo.tasks._builtin as builtin

    moves, real = [], os.replace
    monkeypatch.setattr(builtin.os, "replace", lambda a, b: (moves.append((Path(a), Path(b))), real(a, b)))
    ensure_builtin_tasks(tmp_path, tasks=["spooky-mini"])
    root = tmp_path / "tasks"
    assert [dst for _, dst in moves] == [root / "private/spooky-mini", root / "public/spooky-mini"]
    assert all(src.parent.parent == dst.parent for src, dst in moves)  # a rename, never a copy across
    assert [p.name for p in (root / "public").iterdir()] == ["spooky-mini"]  # no scratch left behind
    assert [p.name for p in (root / "private").iterdir()] == ["spooky-mini"]


def test_registry_lookup_without_answers_for_hosts_that_must_not_hold_them(tmp_path):
    task = get_task("plant-mini", tmp_path, private=False)
    assert (task.public_dir / "description.md").is_file() and not task.answers_path.exists()
    assert not (tmp_path / "tasks/private").exists()


def test_another_seed_gives_other_data(home, tmp_path):
    ensure_builtin_tasks(tmp_path, seed=1, tasks=["spooky-mini"])
    ours = (home / "tasks/public/spooky-mini/train.csv").read_bytes()
    assert (tmp_path / "tasks/public/spooky-mini/train.csv").read_bytes() != ours


def test_ensure_is_a_cache_not_a_regeneration(home):
    probe = home / "tasks/public/cactus-mini/train.csv"
    before = probe.stat().st_mtime_ns
    tasks = ensure_builtin_tasks(home)
    assert probe.stat().st_mtime_ns == before
    assert (
        set(tasks) == set(LEARNING_BUILTINS) == {"spooky-mini", "cactus-mini", "plant-mini", "dogscats-mini"}
    )


def test_answers_live_in_a_separate_private_tree_of_mode_0700(home):
    for task in ensure_builtin_tasks(home).values():
        assert task.public_dir == home / "tasks/public" / task.id
        assert task.private_dir == home / "tasks/private" / task.id
        assert not list(task.public_dir.rglob("answers*")) and task.answers_path.is_file()
        for d in (home / "tasks/private", task.private_dir):
            assert stat.S_IMODE(d.stat().st_mode) == 0o700
        assert stat.S_IMODE(task.answers_path.stat().st_mode) == 0o600
        assert os.path.commonpath([task.public_dir, task.private_dir]) == str(home / "tasks")


def test_every_public_folder_has_a_description_and_sample_submission(home):
    for task in ensure_builtin_tasks(home).values():
        text = (task.public_dir / "description.md").read_text()
        assert text == task.description and "## Evaluation" in text and "Submission File" in text
        sample = pd.read_csv(task.public_dir / "sample_submission.csv")
        assert tuple(sample.columns) == task.submission_columns


def test_spooky_layout(home):
    pub = home / "tasks/public/spooky-mini"
    train, test = pd.read_csv(pub / "train.csv"), pd.read_csv(pub / "test.csv")
    assert list(train.columns) == ["id", "text", "author"] and list(test.columns) == ["id", "text"]
    assert len(train) == 2000 and len(test) == 600 and set(train.author) == {"EAP", "HPL", "MWS"}
    assert train.id.str.fullmatch(r"id\d{5}").all() and not set(train.id) & set(test.id)


def test_cactus_layout(home):
    pub = home / "tasks/public/cactus-mini"
    train = pd.read_csv(pub / "train.csv")
    assert list(train.columns) == ["id", "has_cactus"] and len(train) == 1500
    assert train.id.str.fullmatch(r"[0-9a-f]{8}\.png").all() and set(train.has_cactus) == {0, 1}
    assert sorted(p.name for p in (pub / "train").iterdir()) == sorted(train.id)
    assert len(list((pub / "test").iterdir())) == 500
    img = Image.open(pub / "train" / train.id[0])
    assert img.size == (32, 32) and img.mode == "RGB" and img.format == "PNG"


def test_plant_layout(home):
    pub = home / "tasks/public/plant-mini"
    train, test = pd.read_csv(pub / "train.csv"), pd.read_csv(pub / "test.csv")
    labels = ["healthy", "multiple_diseases", "rust", "scab"]
    assert list(train.columns) == ["image_id", *labels] and list(test.columns) == ["image_id"]
    assert (train[labels].sum(axis=1) == 1).all() and len(train) == 1200 and len(test) == 400
    assert train.image_id.iloc[0] == "Train_0" and test.image_id.iloc[0] == "Test_0"
    assert len(list((pub / "images").glob("*.png"))) == 1600


def test_dogscats_layout(home):
    pub = home / "tasks/public/dogscats-mini"
    names = [p.name for p in (pub / "train").iterdir()]
    assert len(names) == 1500 and all(re.fullmatch(r"(cat|dog)\.\d+\.png", n) for n in names)
    assert {n.split(".")[0] for n in names} == {"cat", "dog"}
    assert sorted(int(p.stem) for p in (pub / "test").iterdir()) == list(range(1, 501))


@pytest.mark.parametrize(
    "task_id, baseline",
    [("spooky-mini", 1.08471), ("cactus-mini", 0.5), ("plant-mini", 0.5), ("dogscats-mini", 0.69315)],
)
def test_sample_submission_is_the_constant_baseline_and_answers_score_perfectly(home, task_id, baseline):
    task = get_task(task_id, home)
    sample = grade_submission(task, task.public_dir / "sample_submission.csv")
    assert sample.status == "ok" and sample.test_metric == baseline
    perfect = grade_submission(task, task.answers_path.read_bytes())
    assert perfect.test_metric == (0.0 if task.lower_is_better else 1.0)


def test_text_task_is_learnable_by_tfidf_logistic_regression(home):
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression

    task = get_task("spooky-mini", home)
    train, test = pd.read_csv(task.public_dir / "train.csv"), pd.read_csv(task.public_dir / "test.csv")
    vec = TfidfVectorizer()
    model = LogisticRegression(C=3, max_iter=1000).fit(vec.fit_transform(train.text), train.author)
    sub = pd.DataFrame(model.predict_proba(vec.transform(test.text)), columns=model.classes_)
    sub.insert(0, "id", test.id)
    result = grade_submission(task, sub.to_csv(index=False).encode())
    assert result.status == "ok" and 0.3 < result.test_metric < 0.8  # uniform: 1.0986


def _features(paths: list[Path]) -> np.ndarray:
    """Colour histograms plus 8x8 downsampled pixels: the simplest image features."""
    imgs = np.stack([np.asarray(Image.open(p)) for p in paths]).astype(np.float32) / 255
    hist = np.stack([np.concatenate([np.histogram(x[..., c], 8, (0, 1))[0] for c in range(3)]) for x in imgs])
    small = imgs.reshape(len(imgs), 8, 4, 8, 4, 3).mean((2, 4)).reshape(len(imgs), -1)
    return np.hstack([hist / 1024.0, small])


def _fit_predict(x_train, y_train, x_test) -> np.ndarray:
    from sklearn.linear_model import LogisticRegression

    return LogisticRegression(max_iter=3000).fit(x_train, y_train).predict_proba(x_test)


@pytest.mark.slow
def test_image_tasks_beat_the_constant_baseline_with_histogram_features(home):
    cactus = get_task("cactus-mini", home)
    train = pd.read_csv(cactus.public_dir / "train.csv")
    test_ids = pd.read_csv(cactus.public_dir / "sample_submission.csv").id
    p = _fit_predict(
        _features([cactus.public_dir / "train" / i for i in train.id]),
        train.has_cactus,
        _features([cactus.public_dir / "test" / i for i in test_ids]),
    )[:, 1]
    auc = grade_submission(
        cactus, pd.DataFrame({"id": test_ids, "has_cactus": p}).to_csv(index=False).encode()
    )
    assert auc.test_metric > 0.75

    dogs = get_task("dogscats-mini", home)
    files = sorted((dogs.public_dir / "train").glob("*.png"))
    y = [f.name.startswith("dog") for f in files]
    ids = list(range(1, 501))
    p = _fit_predict(_features(files), y, _features([dogs.public_dir / "test" / f"{i}.png" for i in ids]))[
        :, 1
    ]
    loss = grade_submission(dogs, pd.DataFrame({"id": ids, "label": p}).to_csv(index=False).encode())
    assert loss.test_metric < 0.66  # constant 0.5: 0.69315

    plant = get_task("plant-mini", home)
    train, test = pd.read_csv(plant.public_dir / "train.csv"), pd.read_csv(plant.public_dir / "test.csv")
    labels = list(plant.target_columns)
    p = _fit_predict(
        _features([plant.public_dir / "images" / f"{i}.png" for i in train.image_id]),
        train[labels].to_numpy().argmax(1),
        _features([plant.public_dir / "images" / f"{i}.png" for i in test.image_id]),
    )
    sub = pd.DataFrame(p, columns=labels)
    sub.insert(0, "image_id", test.image_id)
    assert grade_submission(plant, sub.to_csv(index=False).encode()).test_metric > 0.65
