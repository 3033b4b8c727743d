"""The report's numbers: estimators, parent-following counts, GPU counts, and the written report."""

from __future__ import annotations

import json

import pytest

from tests.archive_gen import generate
from treegrpo.archive import GateNodeRecord, NodeRecord, TimingLine
from treegrpo.report import RunData, advantages, compute, has_signal, load_from_root, write_report


def _n(
    i: str,
    status: str,
    mode: str = "draft",
    parent: str | None = None,
    group: str = "g0",
    reward: float = -0.5,
    rnd: int = 1,
    **kw,
) -> NodeRecord:
    return NodeRecord(
        id=i * 12,
        step=0 if parent is None else 2,
        round=rnd,
        exp_id="t",
        parent_id=parent * 12 if parent else None,
        sibling_group=group,
        mode=mode,
        status=status,
        reward=reward,
        **kw,
    )


def test_signal_uses_the_learners_estimators_grpo_valid_only_needs_two_different_valid_rewards():
    assert not has_signal("grpo_valid_only", [0.5, -0.5, -0.5], ["ok", "crashed", "timeout"])
    assert not has_signal("grpo_valid_only", [0.5, 0.5, -0.5], ["ok", "ok", "crashed"])
    adv = advantages("grpo_valid_only", [0.9, 0.5, -0.5], ["ok", "ok", "crashed"])
    assert adv[0] > 0 > adv[1] and adv[2] == 0.0
    # plain grpo sees the failed sibling, so the same group has a signal under it
    assert has_signal("grpo", [0.5, -0.5, -0.5], ["ok", "crashed", "crashed"])
    recs = [_n("a", "ok", reward=0.5), _n("b", "crashed"), _n("c", "crashed")]
    assert compute(RunData("r", records=recs)).signal.with_signal == 0
    assert compute(RunData("r", records=recs), estimator="grpo").signal.with_signal == 1


def test_improve_and_debug_outcomes_follow_parent_id_across_rounds():
    recs = [
        _n("a", "ok"),
        _n("b", "crashed"),
        _n("c", "ok", "improve", "a", "g1"),
        _n("d", "crashed", "improve", "a", "g1"),
        _n("e", "ok", "debug", "b", "g2", rnd=2),
        _n("f", "timeout", "debug", "b", "g2", rnd=2),
    ]
    m = compute(RunData("r", records=recs))
    assert (m.improve_keeps_valid.k, m.improve_keeps_valid.n) == (1, 2)
    assert (m.debug_fixes_parent.k, m.debug_fixes_parent.n) == (1, 2)
    assert m.crash_rate == pytest.approx(2 / 6) and m.valid_rate == pytest.approx(3 / 6)


def test_gpu_counts_and_signal_per_gpu_hour():
    recs = [
        GateNodeRecord(
            id=f"{i:012d}",
            step=0,
            round=1,
            exp_id="t",
            parent_id=None,
            sibling_group="g0",
            mode="draft",
            status=s,
            reward=r,
            exc_type=e,
            resources=res,
            decl_malformed=mal,
        )
        for i, (s, r, e, res, mal) in enumerate(
            [
                ("ok", 0.9, None, {"gpu": 1}, False),
                ("ok", 0.6, None, None, False),
                ("crashed", -0.5, "GpuIdleError", {"cpu": 2, "gpu": 1}, False),
                ("crashed", -0.5, "X", None, True),
            ]
        )
    ]
    timing = [TimingLine(1, 3600.0, {"gen": 3000.0, "update_actor": 600.0})]
    m = compute(RunData("r", records=recs, timing=timing), gpus=2)
    assert (m.gpu.declared, m.gpu.gpu_idle_errors, m.gpu.malformed) == (2, 1, 1)
    assert (m.signal.groups, m.signal.with_signal) == (1, 1)
    assert m.signal.gpu_hours == 2.0 and m.signal.per_gpu_hour == 0.5
    assert m.node_cost_s == 900.0
    assert m.phases["gen"].share == pytest.approx(3000 / 3600)


def test_report_from_a_seed_format_root_writes_markdown_json_and_plots(tmp_path):
    generate(tmp_path / "root", "small")
    rep = write_report(load_from_root(tmp_path / "root"), tmp_path / "rep")
    names = {p.name for p in (tmp_path / "rep").iterdir()}
    assert {
        "report.md",
        "report.json",
        "crash_rate_by_round.png",
        "phases.png",
        "best_metric_by_round.png",
    } <= names
    assert any(n.startswith("tree_") for n in names)
    data = json.loads(rep.json_path.read_text())
    by_id = {r["run_id"]: r for r in data["runs"]}
    assert by_id["s25_partial"]["nodes"] == 22 and by_id["s32_partial"]["gpu"] is not None
    assert by_id["s25_full"]["gpu"] is None
    md = rep.markdown_path.read_text()
    assert "| crash rate |" in md and "![Crash rate by round](crash_rate_by_round.png)" in md
