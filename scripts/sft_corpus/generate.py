"""Write the seed corpus: <task>/<name>.py plus manifest.json in the learner's package data
(services/learner/treegrpo_learner/sft/corpus/, read by `treegrpo_learner.sft.load_corpus`).

Valid scripts come from a shared skeleton per task times feature/model/hyper-parameter grids
(`_text_tasks.py`, `_image_tasks.py`); failing scripts are broken copies of valid ones, broken the way
model-written code breaks (a wrong column, a wrong path, a typo'd import, a shape mix-up, a
forgotten submission, unnormalised or misaligned predictions). The manifest's `verified` block
is filled by `python -m treegrpo_learner.sft.verify_corpus`, which runs every script on the
generated public data and grades it with the grader. Re-run: `python scripts/sft_corpus/generate.py`.
"""

from __future__ import annotations

import json
import sys
from dataclasses import asdict, replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _image_tasks  # noqa: E402
import _text_tasks  # noqa: E402
from _parts import Script  # noqa: E402

# the corpus ships with the learner, the only service that reads it (its SFT)
OUT = Path(__file__).resolve().parents[2] / "services" / "learner" / "treegrpo_learner" / "sft" / "corpus"

# task -> [(base script prefix, old, new, intended, short name)]
BREAKS: dict[str, list[tuple[str, str, str, str, str]]] = {
    "spooky-mini": [
        ("01_", 'train["author"]', 'train["label"]', "crashed", "wrong_column"),
        ("06_", '"./input/train.csv"', '"./train.csv"', "crashed", "wrong_path"),
        ("05_", "import LogisticRegression", "import LogisticRegresion", "crashed", "import_typo"),
        ("02_", "model.fit(X_tr, y_tr)", "model.fit(X_tr, y)", "crashed", "shape_mismatch"),
        ("03_", 'sub.to_csv("./submission/submission.csv", index=False)\n', "", "no_submission", "no_write"),
        (
            "10_",
            "proba = model.predict_proba(X_test)",
            "proba = model.decision_function(X_test)",
            "invalid_submission",
            "unnormalised",
        ),
        ("11_", "CalibratedClassifierCV(LinearSVC(C=0.5), cv=3)", "LinearSVC(C=0.5)", "crashed", "no_proba"),
        (
            "04_",
            'X_test = vec.transform(test["text"])',
            'X_tst = vec.transform(test["text"])',
            "crashed",
            "name_error",
        ),
    ],
    "cactus-mini": [
        ("01_", 'train["has_cactus"]', 'train["label"]', "crashed", "wrong_column"),
        ("07_", "./input/train/{i}", "./input/train_images/{i}", "crashed", "wrong_path"),
        ("06_", "import RandomForestClassifier", "import RandomForestClassifer", "crashed", "import_typo"),
        ("04_", "model.fit(X_tr, y_tr)", "model.fit(X_tr, y)", "crashed", "shape_mismatch"),
        ("12_", 'sub.to_csv("./submission/submission.csv", index=False)\n', "", "no_submission", "no_write"),
        (
            "03_",
            'sub["has_cactus"] = model.predict_proba(X_test)[:, 1]',
            'sub = pd.DataFrame({"id": range(len(X_test)), "has_cactus": model.predict_proba(X_test)[:, 1]})',
            "invalid_submission",
            "ids_lost",
        ),
        ("13_", "def features(img):", "def extract_features(img):", "crashed", "name_error"),
    ],
    "plant-mini": [
        ("01_", '"multiple_diseases"', '"multiple_disease"', "crashed", "wrong_column"),
        ("06_", "./input/images/{i}.png", "./input/images/{i}.jpg", "crashed", "wrong_path"),
        (
            "12_",
            "from sklearn.ensemble import HistGradientBoostingClassifier",
            "from sklearn.ensembles import HistGradientBoostingClassifier",
            "crashed",
            "import_typo",
        ),
        ("04_", "model.fit(X_tr, y_tr)", "model.fit(X_tr, y)", "crashed", "shape_mismatch"),
        ("09_", 'sub.to_csv("./submission/submission.csv", index=False)\n', "", "no_submission", "no_write"),
        (
            "02_",
            "sub = pd.DataFrame(proba, columns=labels)",
            "sub = pd.DataFrame(proba[:, 1:], columns=labels[1:])",
            "invalid_submission",
            "dropped_column",
        ),
        ("08_", "np.eye(4)[y_va]", "y_va", "crashed", "metric_misuse"),
    ],
    "dogscats-mini": [
        ("01_", 'sub["id"]', 'sub["image_id"]', "crashed", "wrong_column"),
        ("06_", "./input/test/{i}.png", "./input/test/{i}.jpg", "crashed", "wrong_path"),
        (
            "03_",
            "from sklearn.linear_model import LogisticRegression",
            "from sklearn.linear_models import LogisticRegression",
            "crashed",
            "import_typo",
        ),
        ("09_", "model.fit(X_tr, y_tr)", "model.fit(X_tr, y)", "crashed", "shape_mismatch"),
        ("13_", 'sub.to_csv("./submission/submission.csv", index=False)\n', "", "no_submission", "no_write"),
        (
            "02_",
            "np.clip(model.predict_proba(X_test)[:, 1], 0.01, 0.99)",
            "model.predict_proba(X_test)[:, 1] * 100",
            "invalid_submission",
            "percent_labels",
        ),
        ("14_", "import os\n\n", "", "crashed", "missing_import"),
    ],
}


def all_valid() -> dict[str, list[Script]]:
    out = {"spooky-mini": _text_tasks.scripts()}
    for task in ("cactus-mini", "plant-mini", "dogscats-mini"):
        out[task] = _image_tasks.scripts(task)
    return out


def broken(task: str, valid: list[Script]) -> list[Script]:
    out: list[Script] = []
    start = len(valid)
    for k, (prefix, old, new, intended, short) in enumerate(BREAKS[task]):
        base = next(s for s in valid if s.name.startswith(prefix))
        if base.code.count(old) < 1:
            raise SystemExit(f"{task}/{base.name}: break {short!r} finds no {old!r}")
        code = base.code.replace(old, new, 1)
        out.append(
            replace(
                base,
                name=f"{start + k:02d}_bug_{short}",
                code=code,
                intended=intended,
                fixes=base.name,
                tags=base.tags + ("bug", short),
            )
        )
    return out


def main() -> None:
    manifest_path = OUT / "manifest.json"
    old = {}
    if manifest_path.exists():
        old = {
            (e["task"], e["name"]): e.get("verified")
            for e in json.loads(manifest_path.read_text())["scripts"]
        }
    entries = []
    for task, valid in all_valid().items():
        folder = OUT / task
        folder.mkdir(exist_ok=True)
        for stale in folder.glob("*.py"):
            stale.unlink()
        for s in valid + broken(task, valid):
            (folder / f"{s.name}.py").write_text(s.code)
            entry = {k: v for k, v in asdict(s).items() if k != "code"}
            entry["file"] = f"{task}/{s.name}.py"
            entry["tags"] = list(s.tags)
            entry["verified"] = old.get((task, s.name))
            entries.append(entry)
    manifest = {
        "about": "Seed corpus of treegrpo's SFT warm start; written by scripts/sft_corpus/generate.py, "
        "`verified` filled by treegrpo_learner.sft.verify_corpus",
        "scripts": entries,
    }
    manifest_path.write_text(json.dumps(manifest, indent=1) + "\n")
    print(f"wrote {len(entries)} scripts to {OUT}")


if __name__ == "__main__":
    main()
