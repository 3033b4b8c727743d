"""How learnable the built-in tasks are: the constant baseline against simple and better models,
each scored by the grader itself on the test split.

    .venv/bin/python benchmarks/task_signal.py [--home DIR] [--cnn] [--plot docs/img/grader_task_signal.png]

Models: spooky-mini — TF-IDF + logistic regression, then its blend with a naive Bayes on word
counts; image tasks — colour
histograms + 8x8 pixels with logistic regression, then (with --cnn) a 3-layer CNN trained 15 epochs
on the CPU. The constant baseline is the public sample submission.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd
from PIL import Image
from rich.console import Console
from rich.table import Table
from sklearn.linear_model import LogisticRegression

from treegrpo.tasks import Task, ensure_builtin_tasks, grade_submission


def score(task: Task, ids, probs: np.ndarray) -> float:
    sub = pd.DataFrame(probs, columns=list(task.target_columns))
    sub.insert(0, task.id_column, list(ids))
    result = grade_submission(task, sub.to_csv(index=False).encode())
    assert result.status == "ok", result.grade_error
    return float(result.test_metric)


def spooky(task: Task, cnn: bool) -> dict[str, float]:
    from sklearn.feature_extraction.text import CountVectorizer, TfidfVectorizer
    from sklearn.naive_bayes import MultinomialNB

    train, test = pd.read_csv(task.public_dir / "train.csv"), pd.read_csv(task.public_dir / "test.csv")
    out = {}
    vec = TfidfVectorizer()
    lr = LogisticRegression(C=3, max_iter=2000).fit(vec.fit_transform(train.text), train.author)
    out["simple: TF-IDF + LR"] = score(task, test.id, lr.predict_proba(vec.transform(test.text)))
    counts = CountVectorizer(token_pattern=r"[^ ]+")  # words with their punctuation attached
    nb = MultinomialNB(alpha=1.0).fit(counts.fit_transform(train.text), train.author)
    blend = (lr.predict_proba(vec.transform(test.text)) + nb.predict_proba(counts.transform(test.text))) / 2
    out["better: LR + naive Bayes blend"] = score(task, test.id, blend)
    return out


def load(paths) -> np.ndarray:
    return np.stack([np.asarray(Image.open(p)) for p in paths]).astype(np.float32) / 255


def features(imgs: np.ndarray) -> np.ndarray:
    hist = np.stack([np.concatenate([np.histogram(x[..., c], 8, (0, 1))[0] for c in range(3)]) for x in imgs])
    small = imgs.reshape(len(imgs), 8, 4, 8, 4, 3).mean((2, 4)).reshape(len(imgs), -1)
    return np.hstack([hist / 1024.0, small])


def small_cnn(
    x_train: np.ndarray, y: np.ndarray, x_test: np.ndarray, classes: int, epochs: int = 15
) -> np.ndarray:
    import torch
    from torch import nn

    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Conv2d(3, 16, 3, padding=1),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3, padding=1),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 3, padding=1),
        nn.ReLU(),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(64, classes),
    )
    opt = torch.optim.Adam(model.parameters(), 3e-3)
    xt, yt = torch.tensor(x_train).permute(0, 3, 1, 2), torch.tensor(y)
    for _ in range(epochs):
        perm = torch.randperm(len(xt))
        for i in range(0, len(xt), 64):
            idx = perm[i : i + 64]
            opt.zero_grad()
            nn.functional.cross_entropy(model(xt[idx]), yt[idx]).backward()
            opt.step()
    with torch.no_grad():
        return torch.softmax(model(torch.tensor(x_test).permute(0, 3, 1, 2)), 1).numpy()


def image_task(task: Task, cnn: bool) -> dict[str, float]:
    pub = task.public_dir
    if task.id == "cactus-mini":
        train = pd.read_csv(pub / "train.csv")
        ids = pd.read_csv(pub / "sample_submission.csv").id
        x, y, xt = (
            load([pub / "train" / i for i in train.id]),
            train.has_cactus.to_numpy(),
            load([pub / "test" / i for i in ids]),
        )
    elif task.id == "dogscats-mini":
        files = sorted((pub / "train").glob("*.png"))
        ids = list(range(1, len(list((pub / "test").iterdir())) + 1))
        x, y = load(files), np.array([f.name.startswith("dog") for f in files], dtype=np.int64)
        xt = load([pub / "test" / f"{i}.png" for i in ids])
    else:
        train, test = pd.read_csv(pub / "train.csv"), pd.read_csv(pub / "test.csv")
        ids = test.image_id
        x, xt = (
            load([pub / "images" / f"{i}.png" for i in train.image_id]),
            load([pub / "images" / f"{i}.png" for i in ids]),
        )
        y = train[list(task.target_columns)].to_numpy().argmax(1)
    binary = len(task.target_columns) == 1
    pick = (lambda p: p[:, 1:]) if binary else (lambda p: p)
    out = {
        "simple: histograms + pixels, LR": score(
            task, ids, pick(LogisticRegression(max_iter=3000).fit(features(x), y).predict_proba(features(xt)))
        )
    }
    if cnn:
        out["better: 3-layer CNN, 15 epochs"] = score(
            task, ids, pick(small_cnn(x, y, xt, 2 if binary else 4))
        )
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--home", type=Path, default=None, help="tasks home (default: a fresh temp dir)")
    ap.add_argument(
        "--cnn", action="store_true", help="also train the small CNN on the image tasks (minutes)"
    )
    ap.add_argument("--plot", type=Path, default=None, help="write a bar chart here")
    ap.add_argument(
        "--gallery", type=Path, default=None, help="write a grid of training images per class here"
    )
    args = ap.parse_args()
    home = args.home or Path(tempfile.mkdtemp(prefix="task-signal-"))
    tasks = ensure_builtin_tasks(home)
    if args.gallery:
        gallery(tasks, args.gallery)
    rows: list[tuple[str, str, float]] = []
    console = Console(width=140)
    for task in tasks.values():
        base = grade_submission(task, task.public_dir / "sample_submission.csv").test_metric
        rows.append((task.id, "constant (sample submission)", float(base)))
        models = spooky(task, args.cnn) if task.id == "spooky-mini" else image_task(task, args.cnn)
        rows += [(task.id, name, value) for name, value in models.items()]
        console.log(f"{task.id}: done")
    table = Table(title="built-in tasks: test-split score by the grader")
    for col in ("task", "metric (better)", "model", "score"):
        table.add_column(col)
    for task_id, name, value in rows:
        table.add_row(
            task_id, f"{tasks[task_id].metric.value} ({tasks[task_id].direction})", name, f"{value:.4f}"
        )
    console.print(table)
    if args.plot:
        plot(rows, tasks, args.plot)


def gallery(tasks: dict[str, Task], path: Path, per_row: int = 12) -> None:
    """One row of training images per class, upscaled 3x: what the image tasks look like."""
    groups = []
    cactus = pd.read_csv(tasks["cactus-mini"].public_dir / "train.csv")
    for label in (1, 0):
        groups.append(
            [
                tasks["cactus-mini"].public_dir / "train" / i
                for i in cactus.id[cactus.has_cactus == label][:per_row]
            ]
        )
    plant = pd.read_csv(tasks["plant-mini"].public_dir / "train.csv")
    for label in tasks["plant-mini"].target_columns:
        groups.append(
            [
                tasks["plant-mini"].public_dir / "images" / f"{i}.png"
                for i in plant.image_id[plant[label] == 1][:per_row]
            ]
        )
    for kind in ("cat", "dog"):
        groups.append(
            [tasks["dogscats-mini"].public_dir / "train" / f"{kind}.{n}.png" for n in range(per_row)]
        )
    grid = np.vstack([np.hstack([np.asarray(Image.open(p)) for p in paths]) for paths in groups])
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(grid).resize((grid.shape[1] * 3, grid.shape[0] * 3), Image.Resampling.NEAREST).save(path)


def plot(rows, tasks, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(tasks), figsize=(4 * len(tasks), 3.4))
    for ax, (task_id, task) in zip(axes, tasks.items(), strict=True):
        mine = [(n, v) for t, n, v in rows if t == task_id]
        ax.bar(range(len(mine)), [v for _, v in mine], color=["#999999", "#4c72b0", "#dd8452"][: len(mine)])
        ax.set_xticks(range(len(mine)), [n.split(":")[0].split(" (")[0] for n, _ in mine])
        ax.set_title(f"{task_id}\n{task.metric.value} ({task.direction} is better)", fontsize=9)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)


if __name__ == "__main__":
    main()
