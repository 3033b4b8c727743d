"""The report and the explorer show what was re-spent, what the learner skipped, and the entropy.

Imports a private module: `treegrpo.report._data`, `treegrpo.report._explorer`,
`treegrpo.report._output` (what these tests exercise is not on the package's public surface).
"""

from __future__ import annotations

from treegrpo.archive import NodeRecord
from treegrpo.report import Respent, RunData, compute
from treegrpo.report._data import NodeText
from treegrpo.report._explorer import payload
from treegrpo.report._output import summary_rows


def _node(i: int, group: str, step: int, status: str, reward: float) -> NodeRecord:
    return NodeRecord(
        id=f"{i:012d}",
        step=step,
        round=1,
        exp_id="t",
        parent_id=None,
        sibling_group=group,
        mode="draft",
        status=status,
        reward=reward,
    )


def _run() -> RunData:
    flat = [_node(i, "g0", 0, "crashed", -0.5) for i in range(4)]
    mixed = [
        _node(4 + i, "g1", 1, "ok" if i < 2 else "crashed", 0.3 + 0.2 * i if i < 2 else -0.5)
        for i in range(4)
    ]
    new = [_node(8, "g0r", 2, "ok", 0.4), _node(9, "g0r", 2, "ok", 0.6)]  # 2 siblings: sized by the decision
    data = RunData("r", records=flat + mixed + new)
    data.texts = {r.id: NodeText(tokens=10) for r in new}
    data.respent = [Respent("t", 1, 0, "g0", "g0r", 2, 24, "all_failed")]
    data.step_metrics = {1: {"entropy": 2.5, "groups_skipped_no_signal": 1.0}, 2: {"entropy": 2.25}}
    return data


def test_the_report_counts_re_spent_groups_their_signal_and_the_learners_skips():
    m = compute(_run())
    r = m.respend
    assert (r.decisions, r.groups, r.siblings, r.tokens_reserved, r.tokens_generated) == (1, 1, 2, 24, 20)
    assert (r.with_signal, r.skipped_no_signal) == (1, 1)
    assert m.signal.partial_groups == 0 and m.signal.groups == 3  # the 2-sibling group is whole
    assert m.entropy == [2.5, 2.25]
    rows = dict(summary_rows([m]))
    assert rows["zero-variance groups re-spent (decided)"] == ["1/1"]
    assert rows["groups skipped by the learner: no signal"] == ["1"]
    assert rows["policy entropy (first → last step)"] == ["2.500 → 2.250"]


def test_the_explorer_shows_each_rounds_re_spent_count():
    data = _run()
    page = payload([data], [compute(data)], "grpo_valid_only")
    [rnd] = page["runs"][0]["rounds"]
    assert rnd["respent"] == 1
