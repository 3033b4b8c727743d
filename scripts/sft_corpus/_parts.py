"""Building blocks of the seed corpus: a shared skeleton per task plus interchangeable
feature and model blocks. Variable names are the same in every block (X, X_test, y, model,
proba), so scripts differ where real solutions differ (features, model, hyper-parameters) and
read like one author wrote them. `generate.py` assembles and writes the scripts.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Script:
    name: str  # file stem, e.g. "03_tfidf_lr_c4"
    task: str
    plan: str  # the short plan a model states before its code
    code: str
    intended: str = "ok"  # ok | crashed | invalid_submission | no_submission
    fixes: str = ""  # for a failing script: the valid script it is a broken copy of
    tags: tuple[str, ...] = field(default_factory=tuple)


def header(deps: list[str], cpu: int = 1, mem: int = 2) -> str:
    dep_list = ", ".join(f'"{d}"' for d in deps)
    return (
        "# /// script\n"
        '# requires-python = ">=3.10"\n'
        f"# dependencies = [{dep_list}]\n"
        "#\n"
        "# [tool.resources]\n"
        f"# cpu = {cpu}\n"
        f"# mem = {mem}\n"
        "# ephemeral = 1\n"
        "# ///\n"
    )


# ---- models: (import line, constructor expression, needs dense non-negative?, deps) ----------
# Each entry: key -> (imports, constructor, description)
MODELS: dict[str, tuple[str, str, str]] = {
    "dummy": (
        "from sklearn.dummy import DummyClassifier",
        'DummyClassifier(strategy="prior")',
        "a constant class-prior baseline",
    ),
    "lr": (
        "from sklearn.linear_model import LogisticRegression",
        "LogisticRegression(C={C}, max_iter=2000)",
        "logistic regression (C={C})",
    ),
    "nb": (
        "from sklearn.naive_bayes import MultinomialNB",
        "MultinomialNB(alpha={alpha})",
        "multinomial naive Bayes (alpha={alpha})",
    ),
    "gnb": ("from sklearn.naive_bayes import GaussianNB", "GaussianNB()", "Gaussian naive Bayes"),
    "sgd": (
        "from sklearn.linear_model import SGDClassifier",
        'SGDClassifier(loss="log_loss", alpha={alpha}, max_iter=50, random_state=0)',
        "a log-loss SGD linear model (alpha={alpha})",
    ),
    "rf": (
        "from sklearn.ensemble import RandomForestClassifier",
        "RandomForestClassifier(n_estimators={n}, max_depth={depth}, n_jobs=1, random_state=0)",
        "a random forest ({n} trees, depth {depth})",
    ),
    "et": (
        "from sklearn.ensemble import ExtraTreesClassifier",
        "ExtraTreesClassifier(n_estimators={n}, min_samples_leaf=2, n_jobs=1, random_state=0)",
        "extra trees ({n} trees)",
    ),
    "hgb": (
        "from sklearn.ensemble import HistGradientBoostingClassifier",
        "HistGradientBoostingClassifier(max_iter={it}, learning_rate={lr}, random_state=0)",
        "histogram gradient boosting ({it} iterations, lr {lr})",
    ),
    "knn": (
        "from sklearn.neighbors import KNeighborsClassifier",
        'KNeighborsClassifier(n_neighbors={k}, weights="distance")',
        "k-nearest neighbours (k={k})",
    ),
    "svc": (
        "from sklearn.calibration import CalibratedClassifierCV\nfrom sklearn.svm import LinearSVC",
        "CalibratedClassifierCV(LinearSVC(C={C}), cv=3)",
        "a calibrated linear SVM (C={C})",
    ),
}


def model_block(key: str, scale: bool = False, **params) -> tuple[str, str, str]:
    """(imports, `model = ...` line, description) for one model with its hyper-parameters."""
    imports, ctor, desc = MODELS[key]
    ctor = ctor.format(**params)
    desc = desc.format(**params)
    if scale:
        imports = (
            "from sklearn.pipeline import make_pipeline\nfrom sklearn.preprocessing import StandardScaler\n"
            + imports
        )
        ctor = f"make_pipeline(StandardScaler(), {ctor})"
        desc = f"standardised features and {desc}"
    return imports, f"model = {ctor}", desc


def shared_imports(*blocks: str) -> str:
    """One sorted import block holding every line the given blocks import. Every script of a task
    starts with the same block (as a template-following model writes), so the one place a script
    commits to its model is the `model = ...` line, not an import far above it."""
    lines = {line for block in blocks for line in block.splitlines() if line.strip()}
    return "\n".join(sorted(lines, key=lambda line: (line.split()[1], line)))
