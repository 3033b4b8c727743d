"""spooky-mini: author identification from a sentence (3 classes, multi-class log loss)."""

from __future__ import annotations

from _parts import Script, header, model_block, shared_imports

TASK = "spooky-mini"

FEATURES: dict[str, tuple[str, str, str]] = {
    # key -> (imports, code defining X and X_test, description)
    "word12": (
        "from sklearn.feature_extraction.text import TfidfVectorizer",
        "vec = TfidfVectorizer(ngram_range=(1, 2), min_df=2, sublinear_tf=True)\n"
        'X = vec.fit_transform(train["text"])\n'
        'X_test = vec.transform(test["text"])',
        "TF-IDF of word 1-2 grams",
    ),
    "word1": (
        "from sklearn.feature_extraction.text import TfidfVectorizer",
        "vec = TfidfVectorizer(min_df=1)\n"
        'X = vec.fit_transform(train["text"])\n'
        'X_test = vec.transform(test["text"])',
        "TF-IDF of single words",
    ),
    "char": (
        "from sklearn.feature_extraction.text import TfidfVectorizer",
        'vec = TfidfVectorizer(analyzer="char_wb", ngram_range=(2, 4), min_df=2, sublinear_tf=True)\n'
        'X = vec.fit_transform(train["text"])\n'
        'X_test = vec.transform(test["text"])',
        "TF-IDF of character 2-4 grams",
    ),
    "counts": (
        "from sklearn.feature_extraction.text import CountVectorizer",
        "vec = CountVectorizer(ngram_range=(1, 2), min_df=1)\n"
        'X = vec.fit_transform(train["text"])\n'
        'X_test = vec.transform(test["text"])',
        "word 1-2 gram counts",
    ),
    "svd": (
        "from sklearn.decomposition import TruncatedSVD\n"
        "from sklearn.feature_extraction.text import TfidfVectorizer",
        "vec = TfidfVectorizer(ngram_range=(1, 2), min_df=2, sublinear_tf=True)\n"
        "svd = TruncatedSVD(n_components=64, random_state=0)\n"
        'X = svd.fit_transform(vec.fit_transform(train["text"]))\n'
        'X_test = svd.transform(vec.transform(test["text"]))',
        "64 SVD components of word TF-IDF",
    ),
    "stats": (
        "",
        "def text_stats(texts):\n"
        "    rows = []\n"
        "    for t in texts:\n"
        "        words = t.split()\n"
        "        rows.append([len(t), len(words), np.mean([len(w) for w in words] or [0]),\n"
        '                     t.count(","), t.count(";"), t.count(":"), t.count("!"), t.count("?")])\n'
        "    return np.array(rows, dtype=float)\n\n\n"
        'X = text_stats(train["text"])\n'
        'X_test = text_stats(test["text"])',
        "hand-made length and punctuation statistics",
    ),
}

SKELETON = """{header}import os

import numpy as np
import pandas as pd
{imports}
from sklearn.metrics import log_loss
from sklearn.model_selection import train_test_split

train = pd.read_csv("./input/train.csv")
test = pd.read_csv("./input/test.csv")
classes = ["EAP", "HPL", "MWS"]
y = train["author"].map({{c: i for i, c in enumerate(classes)}}).values

{features}

X_tr, X_va, y_tr, y_va = train_test_split(X, y, test_size=0.2, random_state=0, stratify=y)
{model}
model.fit(X_tr, y_tr)
print(f"Validation metric: {{log_loss(y_va, model.predict_proba(X_va)):.5f}}")

model.fit(X, y)
proba = model.predict_proba(X_test)
sub = pd.DataFrame(proba, columns=classes)
sub.insert(0, "id", test["id"])
os.makedirs("./submission", exist_ok=True)
sub.to_csv("./submission/submission.csv", index=False)
"""

# (features, model, params, scale)
COMBOS = [
    ("word12", "dummy", {}, False),
    ("word12", "lr", {"C": 4}, False),
    ("word12", "lr", {"C": 1}, False),
    ("word12", "lr", {"C": 10}, False),
    ("word1", "lr", {"C": 2}, False),
    ("char", "lr", {"C": 4}, False),
    ("counts", "nb", {"alpha": 0.5}, False),
    ("counts", "nb", {"alpha": 1.0}, False),
    ("word12", "nb", {"alpha": 0.1}, False),
    ("char", "nb", {"alpha": 0.3}, False),
    ("word12", "sgd", {"alpha": 1e-4}, False),
    ("word12", "svc", {"C": 0.5}, False),
    ("word12", "rf", {"n": 60, "depth": "None"}, False),
    ("svd", "lr", {"C": 1}, True),
    ("svd", "knn", {"k": 25}, False),
    ("svd", "hgb", {"it": 60, "lr": 0.1}, False),
    ("stats", "hgb", {"it": 100, "lr": 0.05}, False),
    ("stats", "rf", {"n": 200, "depth": 8}, False),
    ("stats", "lr", {"C": 1}, True),
]

MLP = """{header}import os

import numpy as np
import pandas as pd
import torch
from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.metrics import log_loss
from sklearn.model_selection import train_test_split

torch.manual_seed(0)
torch.set_num_threads(1)
train = pd.read_csv("./input/train.csv")
test = pd.read_csv("./input/test.csv")
classes = ["EAP", "HPL", "MWS"]
y = train["author"].map({{c: i for i, c in enumerate(classes)}}).values

vec = TfidfVectorizer(ngram_range=(1, 2), min_df=2, max_features={vocab}, sublinear_tf=True)
X = vec.fit_transform(train["text"]).toarray().astype(np.float32)
X_test = vec.transform(test["text"]).toarray().astype(np.float32)
X_tr, X_va, y_tr, y_va = train_test_split(X, y, test_size=0.2, random_state=0, stratify=y)


def fit(X, y, epochs={epochs}):
    net = torch.nn.Sequential(torch.nn.Linear(X.shape[1], {hidden}), torch.nn.ReLU(),
                              torch.nn.Dropout(0.3), torch.nn.Linear({hidden}, 3))
    opt = torch.optim.Adam(net.parameters(), lr={lr}, weight_decay=1e-5)
    xb, yb = torch.from_numpy(X), torch.from_numpy(y).long()
    for _ in range(epochs):
        for idx in torch.randperm(len(xb)).split(64):
            opt.zero_grad()
            torch.nn.functional.cross_entropy(net(xb[idx]), yb[idx]).backward()
            opt.step()
    return net.eval()


def predict(net, X):
    with torch.no_grad():
        return torch.softmax(net(torch.from_numpy(X)), dim=1).numpy()


net = fit(X_tr, y_tr)
print(f"Validation metric: {{log_loss(y_va, predict(net, X_va)):.5f}}")

net = fit(X, y)
sub = pd.DataFrame(predict(net, X_test), columns=classes)
sub.insert(0, "id", test["id"])
os.makedirs("./submission", exist_ok=True)
sub.to_csv("./submission/submission.csv", index=False)
"""

MLP_GRID = [
    {"vocab": 3000, "hidden": 64, "epochs": 6, "lr": 2e-3},
    {"vocab": 4000, "hidden": 128, "epochs": 4, "lr": 3e-3},
]


TEXT_IMPORTS = shared_imports(
    *(FEATURES[f][0] for f, _, _, _ in COMBOS), *(model_block(m, scale=sc, **p)[0] for _, m, p, sc in COMBOS)
)


def scripts() -> list[Script]:
    out: list[Script] = []
    for i, (feat, mkey, params, scale) in enumerate(COMBOS):
        f_imports, f_code, f_desc = FEATURES[feat]
        m_imports, m_line, m_desc = model_block(mkey, scale=scale, **params)
        imports = TEXT_IMPORTS
        code = SKELETON.format(
            header=header(["numpy", "pandas", "scikit-learn"]), imports=imports, features=f_code, model=m_line
        )
        plan = (
            f"Represent each sentence by {f_desc} and fit {m_desc} to predict the author. "
            "Hold out 20% to print the validation log loss, refit on all rows and write "
            "the class probabilities for the test sentences."
        )
        out.append(Script(f"{i:02d}_{feat}_{mkey}", TASK, plan, code, tags=(feat, mkey)))
    for j, p in enumerate(MLP_GRID):
        code = MLP.format(header=header(["numpy", "pandas", "scikit-learn", "torch"], mem=3), **p)
        plan = (
            f"Train a small torch MLP ({p['hidden']} hidden units) on TF-IDF features of the "
            f"{p['vocab']} most frequent word 1-2 grams for {p['epochs']} epochs; print the "
            "validation log loss, retrain on everything and write softmax probabilities."
        )
        out.append(Script(f"{len(COMBOS) + j:02d}_mlp_h{p['hidden']}", TASK, plan, code, tags=("mlp",)))
    return out
