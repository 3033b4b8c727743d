"""The learning statistics: the sample score, the group bootstrap, the paired difference, the verdict,
the round-1 agreement check and the curves, on synthetic runs whose answers are known.

Imports a private module: `treegrpo.report._compare`, `treegrpo.report._learning`,
`treegrpo.report._stats` (what these tests exercise is not on the package's public surface).
"""

from __future__ import annotations

import pytest

from treegrpo.archive import NodeRecord
from treegrpo.report import RunData
from treegrpo.report._compare import compare, default_late_from
from treegrpo.report._learning import POOLED, curves, scorers
from treegrpo.report._stats import (
    FAIL,
    Estimate,
    cluster_bootstrap,
    mid_rank_scorer,
    paired_difference,
    verdict,
)

pytestmark = pytest.mark.timeout(60)


def test_mid_rank_score_ranks_against_round_one_and_scores_a_failure_as_the_worst():
    score = mid_rank_scorer([FAIL, 1.0, 2.0, 3.0])
    assert score(FAIL) == pytest.approx(0.125)  # ties with the one failed reference node
    assert score(2.0) == pytest.approx(0.625)  # beats 2, ties 1 of 4
    assert score(10.0) == 1.0 and score(0.5) == 0.25  # unit-free: 10 is not "worth more" than 3.01
    assert sum(map(score, [FAIL, 1.0, 2.0, 3.0])) / 4 == pytest.approx(0.5)
    assert score(FAIL) < score(-1e9)  # any valid node beats any failure


def test_bootstrap_resamples_whole_sibling_groups_so_correlated_siblings_widen_the_interval():
    # ten groups whose sixteen siblings are identical: the information of ten samples, not 160
    groups = [[float(i % 2)] * 16 for i in range(10)]
    est = cluster_bootstrap(groups, ["t"] * 10, n=2000)
    assert est.value == pytest.approx(0.5)
    assert est.hi - est.lo > 0.4  # a node-level bootstrap would give ~0.15


def test_bootstrap_keeps_each_task_s_share_fixed():
    groups = [[0.0, 0.0]] * 5 + [[1.0, 1.0]] * 5
    est = cluster_bootstrap(groups, ["a"] * 5 + ["b"] * 5, n=500)
    assert (est.value, est.lo, est.hi) == (0.5, 0.5, 0.5)  # unstratified resampling would move the mean


def test_paired_difference_cancels_what_the_pairs_share():
    # pair i: both arms at level i (large spread between pairs), train 0.05 higher in every pair
    control = [[float(i), float(i)] for i in range(20)]
    train = [[v + 0.05 for v in g] for g in control]
    est = paired_difference(train, control, ["t"] * 20, n=1000)
    assert est.value == pytest.approx(0.05)
    assert est.lo == pytest.approx(0.05) and est.hi == pytest.approx(0.05)  # unpaired: about ±3


@pytest.mark.parametrize(
    ("est", "expected"),
    [
        (Estimate(0.1, 0.01, 0.2), "learned"),
        (Estimate(-0.1, -0.2, -0.01), "worse"),
        (Estimate(0.1, -0.01, 0.2), "no evidence"),
        (Estimate(0.1, 0.0, 0.2), "no evidence"),
        (Estimate(None), "no evidence"),
        (Estimate(0.3), "no evidence"),
    ],
)
def test_verdict_needs_the_whole_interval_on_one_side_of_zero(est, expected):
    assert verdict(est) == expected


def test_late_rounds_are_the_later_half_and_never_round_one():
    assert [default_late_from(range(1, r + 1)) for r in (1, 2, 3, 4, 5, 6)] == [2, 2, 2, 3, 3, 4]


def _run(
    run_id: str,
    late_shift: float,
    tasks=("spooky-mini", "plant-mini"),
    rounds=3,
    steps=4,
    g=4,
    fail_every: int = 4,
    tokens=lambda task, rnd, step, i: f"{task}{rnd}{step}{i}",
) -> RunData:
    """Round 1 the same in every run; rounds > 1 shifted by `late_shift` (oriented metric)."""
    data = RunData(run_id)
    for task in tasks:
        for rnd in range(1, rounds + 1):
            for step in range(steps):
                for i in range(g):
                    nid = f"{run_id}-{task}-{rnd}-{step}-{i}"
                    failed = (step * g + i) % fail_every == 0
                    oriented = 0.1 * ((step * 7 + i * 3) % 5) + (late_shift if rnd > 1 else 0.0)
                    data.records.append(
                        NodeRecord(
                            id=nid,
                            step=step,
                            round=rnd,
                            exp_id=task,
                            parent_id=None,
                            sibling_group=f"{run_id}-{task}-{rnd}-{step}",
                            mode="draft",
                            status="crashed" if failed else "ok",
                            oriented=None if failed else oriented,
                        )
                    )
                    data.versions[nid] = rnd - 1
                    data.fingerprints[nid] = tokens(task, rnd, step, i)
    return data


def test_compare_says_learned_when_training_raised_the_late_rounds_and_worse_when_it_lowered_them():
    control = _run("c", 0.0)
    up = compare(_run("t", 0.3), control, n=500)
    assert up.verdict == "learned" and up.pooled.difference.lo > 0
    assert set(up.tasks) == {"plant-mini", "spooky-mini"} and all(
        d.verdict == "learned" for d in up.tasks.values()
    )
    assert up.late_rounds == [2, 3]
    down = compare(_run("t", -0.3), control, n=500)
    assert down.verdict == "worse" and down.pooled.difference.hi < 0
    same = compare(_run("t", 0.0), control, n=500)
    assert same.verdict == "no evidence" and same.pooled.difference.value == pytest.approx(0.0)


def test_round_one_agreement_counts_token_identical_completions_and_flags_a_shifted_start():
    control = _run("c", 0.0)
    exact = compare(_run("t", 0.3), control, n=300).round1
    assert exact.identical_share == 1.0 and exact.ok and exact.difference.value == pytest.approx(0.0)
    half = _run("t", 0.3, tokens=lambda task, rnd, step, i: f"{task}{rnd}{step}{i}" if i % 2 else "other")
    assert compare(half, control, n=300).round1.identical_share == pytest.approx(0.5)
    shifted = _run("t", 0.0, tokens=lambda *a: "x")  # a different start: fewer failures in round 1
    shifted_start = _run("t2", 0.0, fail_every=1000, tokens=lambda *a: "x")
    assert compare(shifted, control, n=300).round1.ok is True  # same scores: within noise
    assert compare(shifted_start, control, n=300).round1.ok is False


def test_curves_give_failed_share_metrics_and_score_per_task_and_pooled_by_round_and_version():
    run = _run("r", 0.2, fail_every=4)
    rows = curves(run, scorers([run]), "round", n=200)
    spooky = {r.x: r for r in rows if r.task == "spooky-mini"}
    pooled = {r.x: r for r in rows if r.task == POOLED}
    assert (
        spooky[1].failed_share.value == pytest.approx(0.25)
        and spooky[1].groups == 4
        and spooky[1].nodes == 16
    )
    assert spooky[2].mean_oriented.value == pytest.approx(spooky[1].mean_oriented.value + 0.2)
    assert spooky[1].score.value == pytest.approx(0.5) and spooky[2].score.value > 0.5
    assert pooled[1].nodes == 32 and pooled[1].mean_oriented.value is None  # raw metrics are not pooled
    assert pooled[2].score.lo <= pooled[2].score.value <= pooled[2].score.hi
    by_version = curves(run, scorers([run]), "version", n=200)
    assert sorted({r.x for r in by_version}) == [0, 1, 2]
    assert curves(RunData("no-versions", records=run.records), scorers([run]), "version") == []


def test_identical_arms_in_another_order_read_exactly_zero_not_a_rounding_error_called_learned():
    a = [[0.1, 0.7, 0.2], [0.3, 0.6, 0.9]] * 5
    b = [list(reversed(g)) for g in a]  # same numbers, another summation order
    est = paired_difference(a, b, ["t"] * 10, n=300)
    assert (est.value, est.lo, est.hi) == (0.0, 0.0, 0.0) and verdict(est) == "no evidence"


def test_a_minimum_difference_turns_a_tiny_consistent_change_into_no_evidence():
    tiny = Estimate(0.025, 0.006, 0.046)  # paired arms: a small change clears 0
    assert verdict(tiny) == "learned"
    assert verdict(tiny, min_difference=0.05) == "no evidence"
    assert verdict(Estimate(0.4, 0.3, 0.5), min_difference=0.05) == "learned"
    assert verdict(Estimate(-0.025, -0.046, -0.006), min_difference=0.05) == "no evidence"
    assert compare(_run("t", 0.3), _run("c", 0.0), n=300, min_difference=10.0).verdict == "no evidence"
