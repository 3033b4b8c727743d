"""The corpus scripts of the three image tasks (32x32 RGB PNGs): cactus-mini, plant-mini, dogscats-mini."""

from __future__ import annotations

from _parts import Script, header, model_block, shared_imports

FEATURES: dict[str, tuple[str, str]] = {
    # key -> (def features(img) ..., description)
    "hist8": (
        "def features(img):\n"
        "    return np.concatenate([np.histogram(img[..., c], bins=8, range=(0, 1))[0] for c in range(3)])",
        "8-bin colour histograms per channel",
    ),
    "hist16": (
        "def features(img):\n"
        "    return np.concatenate([np.histogram(img[..., c], bins=16, range=(0, 1))[0] for c in range(3)])",
        "16-bin colour histograms per channel",
    ),
    "stats": (
        "def features(img):\n"
        "    return np.concatenate([img.mean(axis=(0, 1)), img.std(axis=(0, 1)),\n"
        "                           img.min(axis=(0, 1)), img.max(axis=(0, 1))])",
        "per-channel mean, std, min and max",
    ),
    "px8": ("def features(img):\n    return img[::4, ::4].ravel()", "8x8 downsampled pixels"),
    "px16": ("def features(img):\n    return img[::2, ::2].ravel()", "16x16 downsampled pixels"),
    "grad": (
        "def features(img):\n"
        "    gray = img.mean(axis=2)\n"
        "    gy, gx = np.gradient(gray)\n"
        "    mag = np.hypot(gx, gy)\n"
        "    edges = np.histogram(mag, bins=12, range=(0, 0.5))[0]\n"
        "    return np.concatenate([edges, img.mean(axis=(0, 1)), img.std(axis=(0, 1))])",
        "a gradient-magnitude histogram plus colour means",
    ),
    "mix": (
        "def features(img):\n"
        "    hist = np.concatenate([np.histogram(img[..., c], bins=8, range=(0, 1))[0] for c in range(3)])\n"
        "    return np.concatenate([hist / hist.sum(), img[::4, ::4].ravel()])",
        "colour histograms plus 8x8 pixels",
    ),
}

# (features, model, params, scale) shared by the three tasks
COMBOS = [
    ("stats", "dummy", {}, False),
    ("hist8", "lr", {"C": 1.0}, True),
    ("hist16", "lr", {"C": 0.1}, True),
    ("stats", "lr", {"C": 1.0}, True),
    ("px8", "lr", {"C": 0.1}, True),
    ("px16", "lr", {"C": 0.05}, True),
    ("hist8", "rf", {"n": 200, "depth": "None"}, False),
    ("stats", "rf", {"n": 100, "depth": 6}, False),
    ("px8", "rf", {"n": 200, "depth": 12}, False),
    ("mix", "rf", {"n": 100, "depth": "None"}, False),
    ("grad", "et", {"n": 200}, False),
    ("mix", "et", {"n": 100}, False),
    ("hist16", "hgb", {"it": 80, "lr": 0.1}, False),
    ("mix", "hgb", {"it": 60, "lr": 0.1}, False),
    ("grad", "hgb", {"it": 100, "lr": 0.1}, False),
    ("px8", "knn", {"k": 15}, True),
    ("hist8", "knn", {"k": 31}, True),
    ("stats", "gnb", {}, False),
    ("px16", "gnb", {}, False),
]

LOAD = """def load_image(path):
    return np.asarray(Image.open(path).convert("RGB"), dtype=np.float32) / 255.0


{features}
"""

# Each task: how to read the inputs into X, y, X_test, how to score, how to write.
READ = {
    "cactus-mini": """train = pd.read_csv("./input/train.csv")
sub = pd.read_csv("./input/sample_submission.csv")
X = np.stack([features(load_image(f"./input/train/{i}")) for i in train["id"]])
y = train["has_cactus"].values
X_test = np.stack([features(load_image(f"./input/test/{i}")) for i in sub["id"]])""",
    "plant-mini": """labels = ["healthy", "multiple_diseases", "rust", "scab"]
train = pd.read_csv("./input/train.csv")
test = pd.read_csv("./input/test.csv")
X = np.stack([features(load_image(f"./input/images/{i}.png")) for i in train["image_id"]])
y = train[labels].values.argmax(axis=1)
X_test = np.stack([features(load_image(f"./input/images/{i}.png")) for i in test["image_id"]])""",
    "dogscats-mini": """files = sorted(os.listdir("./input/train"))
X = np.stack([features(load_image(f"./input/train/{f}")) for f in files])
y = np.array([1 if f.startswith("dog") else 0 for f in files])
sub = pd.read_csv("./input/sample_submission.csv")
X_test = np.stack([features(load_image(f"./input/test/{i}.png")) for i in sub["id"]])""",
}

SCORE = {
    "cactus-mini": (
        "from sklearn.metrics import roc_auc_score",
        'print(f"Validation metric: {roc_auc_score(y_va, model.predict_proba(X_va)[:, 1]):.5f}")',
    ),
    "plant-mini": (
        "from sklearn.metrics import roc_auc_score",
        'print(f"Validation metric: '
        "{roc_auc_score(np.eye(4)[y_va], model.predict_proba(X_va), average='macro'):.5f}\")",
    ),
    "dogscats-mini": (
        "from sklearn.metrics import log_loss",
        'print(f"Validation metric: {log_loss(y_va, model.predict_proba(X_va)[:, 1]):.5f}")',
    ),
}

WRITE = {
    "cactus-mini": """sub["has_cactus"] = model.predict_proba(X_test)[:, 1]""",
    "plant-mini": """proba = model.predict_proba(X_test)
sub = pd.DataFrame(proba, columns=labels)
sub.insert(0, "image_id", test["image_id"])""",
    "dogscats-mini": """sub["label"] = np.clip(model.predict_proba(X_test)[:, 1], 0.01, 0.99)""",
}

TARGET = {
    "cactus-mini": ("whether an aerial image shows a cactus", "ROC AUC"),
    "plant-mini": (
        "the leaf's condition (healthy, multiple diseases, rust, scab)",
        "mean column-wise ROC AUC",
    ),
    "dogscats-mini": ("whether the picture is a dog", "log loss"),
}

SKELETON = """{header}import os

import numpy as np
import pandas as pd
from PIL import Image
{imports}
from sklearn.model_selection import train_test_split


{load}

{read}

X_tr, X_va, y_tr, y_va = train_test_split(X, y, test_size=0.2, random_state=0, stratify=y)
{model}
model.fit(X_tr, y_tr)
{score}

model.fit(X, y)
{write}
os.makedirs("./submission", exist_ok=True)
sub.to_csv("./submission/submission.csv", index=False)
"""


def sklearn_scripts(task: str) -> list[Script]:
    out: list[Script] = []
    score_import, score_line = SCORE[task]
    what, metric = TARGET[task]
    for i, (feat, mkey, params, scale) in enumerate(COMBOS):
        f_code, f_desc = FEATURES[feat]
        m_imports, m_line, m_desc = model_block(mkey, scale=scale, **params)
        imports = shared_imports(*(model_block(m, scale=sc, **p)[0] for _, m, p, sc in COMBOS), score_import)
        code = SKELETON.format(
            header=header(["numpy", "pandas", "pillow", "scikit-learn"]),
            imports=imports,
            load=LOAD.format(features=f_code),
            read=READ[task],
            model=m_line,
            score=score_line,
            write=WRITE[task],
        )
        plan = (
            f"Describe each image by {f_desc} and fit {m_desc} to predict {what}. "
            f"Print the {metric} on a 20% hold-out, refit on all images and write the "
            "predicted probabilities for the test images."
        )
        out.append(Script(f"{i:02d}_{feat}_{mkey}", task, plan, code, tags=(feat, mkey)))
    return out


CNN_MODEL = '''class SmallCNN:
    """A two-block conv net with a scikit-learn style fit / predict_proba."""

    def __init__(self, n_classes, epochs={epochs}, lr={lr}, width={width}):
        self.n_classes, self.epochs, self.lr, self.width = n_classes, epochs, lr, width

    def fit(self, X, y):
        torch.manual_seed(0)
        w = self.width
        self.net = torch.nn.Sequential(
            torch.nn.Conv2d(3, w, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
            torch.nn.Conv2d(w, 2 * w, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
            torch.nn.Flatten(), torch.nn.Linear(2 * w * 8 * 8, 64), torch.nn.ReLU(),
            torch.nn.Linear(64, self.n_classes))
        opt = torch.optim.Adam(self.net.parameters(), lr=self.lr)
        xb, yb = torch.from_numpy(X), torch.from_numpy(y).long()
        for _ in range(self.epochs):
            for idx in torch.randperm(len(xb)).split(64):
                opt.zero_grad()
                torch.nn.functional.cross_entropy(self.net(xb[idx]), yb[idx]).backward()
                opt.step()
        return self

    def predict_proba(self, X):
        with torch.no_grad():
            return torch.softmax(self.net.eval()(torch.from_numpy(X)), dim=1).numpy()
'''

CNN_SKELETON = """{header}import os

import numpy as np
import pandas as pd
import torch
from PIL import Image
{imports}
from sklearn.model_selection import train_test_split

torch.set_num_threads(1)


{load}

{cnn}

{read}

X_tr, X_va, y_tr, y_va = train_test_split(X, y, test_size=0.2, random_state=0, stratify=y)
model = SmallCNN(n_classes={n_classes})
model.fit(X_tr, y_tr)
{score}

model.fit(X, y)
{write}
os.makedirs("./submission", exist_ok=True)
sub.to_csv("./submission/submission.csv", index=False)
"""

CNN_GRID = [
    {"epochs": 3, "lr": 3e-3, "width": 8},
    {"epochs": 4, "lr": 2e-3, "width": 12},
]


def cnn_scripts(task: str, start: int) -> list[Script]:
    out: list[Script] = []
    score_import, score_line = SCORE[task]
    what, metric = TARGET[task]
    chw = "def features(img):\n    return img.transpose(2, 0, 1)"
    for j, p in enumerate(CNN_GRID):
        code = CNN_SKELETON.format(
            header=header(["numpy", "pandas", "pillow", "scikit-learn", "torch"], mem=3),
            imports=score_import,
            load=LOAD.format(features=chw),
            cnn=CNN_MODEL.format(**p),
            read=READ[task],
            n_classes=4 if task == "plant-mini" else 2,
            score=score_line,
            write=WRITE[task],
        )
        plan = (
            f"Train a small two-block CNN (width {p['width']}) on the raw 32x32 pixels for "
            f"{p['epochs']} epochs with Adam to predict {what}; print the {metric} on a 20% "
            "hold-out, retrain on all images and write the softmax probabilities."
        )
        out.append(Script(f"{start + j:02d}_cnn_w{p['width']}", task, plan, code, tags=("cnn",)))
    return out


def scripts(task: str) -> list[Script]:
    base = sklearn_scripts(task)
    return base + cnn_scripts(task, len(base))
