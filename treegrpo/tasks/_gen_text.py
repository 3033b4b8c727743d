"""spooky-mini: sentences by three synthetic "authors" (EAP, HPL, MWS).

Each author writes from the same English word pool but with its own habits: function-word rates,
a preferred (partly shared) set of content words, favourite two-word phrases, punctuation and
sentence length. Single sentences are short, so no single cue decides the author: bag-of-words
models land well below the uniform log loss (ln 3 = 1.0986) and richer models do better still.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

AUTHORS = ("EAP", "HPL", "MWS")
AUTHOR_SHARE = (0.40, 0.29, 0.31)  # the original competition's class balance

FUNCTION = (
    "the of and to a in that it was i he his my which with had but not as for by from at "
    "upon this is me be all her she so on were its we their there been one more than what "
    "when no could would only yet some have our them who".split()
)
CONTENT = (
    "night dark shadow ancient dread terror house door window room stone wall sea moon light "
    "death life heart soul mind eyes face hand voice silence sound horror fear madness dream "
    "sleep grave tomb corpse blood cold old strange hideous nameless unknown city street hill "
    "valley forest mountain river storm wind rain fire ship island book letter manuscript "
    "friend father mother sister love hope grief misery despair happiness nature beauty "
    "creature monster being form thing figure daemon spirit god race cult ritual crypt vault "
    "abyss gulf stars sky earth lake ice snow sun morning evening hour time years days age "
    "feeling reason truth science knowledge secret mystery wonder idea thought memory glance "
    "step path journey wretched miserable gentle sublime terrible frightful ghastly monstrous "
    "eldritch blasphemous cyclopean singular peculiar bizarre minute intense vivid sweet dear "
    "beloved tender lovely gloomy melancholy black white grey pale red green vast immense".split()
)
PHRASES = (
    "in the",
    "of the",
    "it was",
    "upon the",
    "i had",
    "i was",
    "could not",
    "at length",
    "and the",
    "to the",
    "that the",
    "my own",
    "the old",
    "as if",
    "seemed to",
    "did not",
    "i felt",
    "in truth",
    "no doubt",
    "the same",
    "of my",
    "for the",
    "i know",
    "at last",
)
PUNCT = (",", ";", "—", "!")


def _author_profiles(rng: np.random.Generator) -> list[dict]:
    """Word, phrase and punctuation distributions per author: overlapping, not disjoint."""
    n_f, n_c, n_p = len(FUNCTION), len(CONTENT), len(PHRASES)
    base_f = rng.dirichlet(np.full(n_f, 2.0))
    profiles = []
    for a in range(len(AUTHORS)):
        f = base_f * rng.lognormal(0.0, 0.3, n_f)  # the same function words, different rates
        c = rng.lognormal(0.0, 0.6, n_c)  # each author leans on its own content words
        favourite = rng.choice(n_c, size=25, replace=False)
        c[favourite] *= 2.0
        p = rng.lognormal(0.0, 0.9, n_p)
        punct = np.array(
            [
                [0.10, 0.015, 0.004, 0.002],  # EAP: commas, semicolons, dashes
                [0.07, 0.004, 0.012, 0.004],  # HPL: dashes and exclamations
                [0.09, 0.010, 0.002, 0.006],
            ]
        )[a]
        profiles.append(
            {
                "f": f / f.sum(),
                "c": c / c.sum(),
                "p": p / p.sum(),
                "punct": punct,
                "func_rate": (0.52, 0.45, 0.50)[a],
                "phrase_rate": (0.07, 0.05, 0.08)[a],
                "len_mu": (3.05, 2.95, 2.85)[a],
                "question": (0.02, 0.03, 0.08)[a],
            }
        )
    return profiles


def _sentence(rng: np.random.Generator, prof: dict, shared_c: np.ndarray) -> str:
    n = int(np.clip(rng.lognormal(prof["len_mu"], 0.45), 4, 80))
    kinds = rng.choice(
        3, size=n, p=[prof["phrase_rate"], prof["func_rate"], 1 - prof["phrase_rate"] - prof["func_rate"]]
    )
    n_p, n_f, n_c = (int((kinds == k).sum()) for k in range(3))
    phrases = iter(rng.choice(len(PHRASES), size=n_p, p=prof["p"]))
    funcs = iter(rng.choice(len(FUNCTION), size=n_f, p=prof["f"]))
    # half of the content words come from the shared pool: the vocabularies overlap
    n_shared = int(rng.binomial(n_c, 0.5))
    contents = iter(
        np.concatenate(
            [
                rng.choice(len(CONTENT), size=n_shared, p=shared_c),
                rng.choice(len(CONTENT), size=n_c - n_shared, p=prof["c"]),
            ]
        )[rng.permutation(n_c)]
    )
    marks = np.searchsorted(np.cumsum(prof["punct"]), rng.random(n), side="right")
    words: list[str] = []
    for i, kind in enumerate(kinds):
        if kind == 0:
            words.extend(PHRASES[next(phrases)].split())
        elif kind == 1:
            words.append(FUNCTION[next(funcs)])
        else:
            words.append(CONTENT[next(contents)])
        if marks[i] < len(PUNCT) and i < n - 1:
            words[-1] += PUNCT[marks[i]] if marks[i] != 2 else ""
            if marks[i] == 2:
                words.append(PUNCT[2])
    text = " ".join(words)
    end = "?" if rng.random() < prof["question"] else "."
    return text[0].upper() + text[1:] + end


def generate(rng: np.random.Generator, n_train: int = 2000, n_test: int = 600) -> dict[str, pd.DataFrame]:
    """Returns the public train/test/sample_submission frames and the private one-hot answers."""
    profiles = _author_profiles(rng)
    shared_c = rng.dirichlet(np.full(len(CONTENT), 1.0))
    n = n_train + n_test
    labels = rng.choice(len(AUTHORS), size=n, p=AUTHOR_SHARE)
    texts = [_sentence(rng, profiles[a], shared_c) for a in labels]
    ids = [f"id{v:05d}" for v in rng.choice(100000, size=n, replace=False)]
    authors = [AUTHORS[a] for a in labels]
    frame = pd.DataFrame({"id": ids, "text": texts, "author": authors})
    train, test = frame.iloc[:n_train].reset_index(drop=True), frame.iloc[n_train:].reset_index(drop=True)
    answers = pd.DataFrame({"id": test["id"]})
    for a in AUTHORS:
        answers[a] = (test["author"] == a).astype(int)
    sample = pd.DataFrame(
        {"id": test["id"], "EAP": 0.403493538995863, "HPL": 0.287808366106543, "MWS": 0.308698094897594}
    )
    return {
        "train.csv": train,
        "test.csv": test.drop(columns=["author"]),
        "sample_submission.csv": sample,
        "answers.csv": answers,
    }
