"""The statistics behind the learning curves and the train-vs-control verdict (numpy, no torch).

Siblings of one group share a prompt and a parent, so they are correlated: every interval here is a
*cluster* bootstrap that resamples whole sibling groups (within each task, so the task mix stays
fixed), never single nodes. Intervals are percentile intervals (2.5 %, 97.5 %).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

FAIL = -math.inf  # a failed node's value: below every valid metric
EPS = 1e-12  # below this an estimate is 0 (rounding of sums, not a difference)
VERDICTS = ("learned", "no evidence", "worse")
Stat = Callable[[np.ndarray], np.ndarray]  # (B, N) values with NaN = not counted -> (B,)


@dataclass(frozen=True)
class Estimate:
    value: float | None
    lo: float | None = None
    hi: float | None = None

    @property
    def ci95(self) -> list[float | None]:
        return [self.lo, self.hi]


def mid_rank_scorer(reference: Sequence[float]) -> Callable[[float], float]:
    """Score a value by its mid-rank against `reference` (a task's round-1 nodes, failures = FAIL):
    P(value beats a reference node) + ½ P(tie). In [0, 1]; the reference itself averages 0.5; a
    failure scores the task's worst (½ × the reference's failed share). Unit-free, so scores of
    tasks with different metrics (log loss, AUC) can be pooled, and one outlier cannot dominate."""
    ref = np.sort(np.asarray(reference, dtype=float))
    if not len(ref):
        raise ValueError("empty reference: the task has no round-1 nodes")

    def score(v: float) -> float:
        lo, hi = np.searchsorted(ref, v, "left"), np.searchsorted(ref, v, "right")
        return float(lo + 0.5 * (hi - lo)) / len(ref)

    return score


def _matrix(clusters: Sequence[Sequence[float]]) -> np.ndarray:
    width = max((len(c) for c in clusters), default=0)
    m = np.full((len(clusters), max(width, 1)), np.nan)
    for i, c in enumerate(clusters):
        m[i, : len(c)] = c
    return m


def _indices(strata: Sequence[str], n: int, rng: np.random.Generator) -> np.ndarray:
    """(n, K) cluster indices: each resample draws as many clusters per stratum as it has."""
    cols = []
    for s in sorted(set(strata)):
        members = np.array([i for i, x in enumerate(strata) if x == s])
        cols.append(members[rng.integers(0, len(members), (n, len(members)))])
    return np.concatenate(cols, axis=1)


def _quiet(stat: Stat, x: np.ndarray) -> np.ndarray:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN resamples: NaN, dropped below
        return stat(x)


def _finite(x: float) -> float | None:
    return float(x) if np.isfinite(x) else None


def _snap(x: float) -> float:
    """Sums of the same numbers in another order differ by ~1e-16: identical arms must read 0 exactly,
    never a 'learned' interval of [1e-16, 1e-16]."""
    return 0.0 if abs(x) < EPS else float(x)


def _interval(point: float, samples: np.ndarray) -> Estimate:
    samples = samples[np.isfinite(samples)]
    if not np.isfinite(point) or not len(samples):
        return Estimate(_finite(point))
    lo, hi = np.percentile(samples, [2.5, 97.5])
    return Estimate(_snap(point), _snap(lo), _snap(hi))


def mean(x: np.ndarray) -> np.ndarray:
    return np.nanmean(x, axis=1)


def median(x: np.ndarray) -> np.ndarray:
    return np.nanmedian(x, axis=1)


def cluster_bootstrap(
    clusters: Sequence[Sequence[float]],
    strata: Sequence[str],
    stat: Stat = mean,
    n: int = 1000,
    seed: int = 0,
) -> Estimate:
    """`stat` over all values (NaN = not counted) with a 95 % interval from resampling clusters."""
    if not clusters:
        return Estimate(None)
    m = _matrix(clusters)
    point = _quiet(stat, m.reshape(1, -1))[0]
    idx = _indices(strata, n, np.random.default_rng(seed))
    return _interval(point, _quiet(stat, m[idx].reshape(n, -1)))


def paired_difference(
    a: Sequence[Sequence[float]],
    b: Sequence[Sequence[float]],
    strata: Sequence[str],
    n: int = 2000,
    seed: int = 0,
) -> Estimate:
    """mean(a) − mean(b) over paired clusters (a[i] and b[i] sit at the same place in both trees:
    task, round, step), resampling the pairs together. A cluster missing in one arm is empty there."""
    if not a:
        return Estimate(None)
    ma, mb = _matrix(a), _matrix(b)
    point = _quiet(mean, ma.reshape(1, -1))[0] - _quiet(mean, mb.reshape(1, -1))[0]
    idx = _indices(strata, n, np.random.default_rng(seed))
    samples = _quiet(mean, ma[idx].reshape(n, -1)) - _quiet(mean, mb[idx].reshape(n, -1))
    return _interval(point, samples)


def verdict(diff: Estimate, min_difference: float = 0.0) -> str:
    """`learned` when the whole interval is above 0 (and the difference at least `min_difference`),
    `worse` when below 0 (and at most -`min_difference`), else `no evidence`. With exactly paired
    arms a tiny but consistent change already clears 0: `min_difference` asks for a size too."""
    if diff.lo is None or diff.hi is None or diff.value is None:
        return "no evidence"
    if diff.lo > 0 and diff.value >= min_difference:
        return "learned"
    if diff.hi < 0 and diff.value <= -min_difference:
        return "worse"
    return "no evidence"
