"""The explorer's data: every node of the runs with its texts, the rounds, the curves and the verdict,
as one JSON document that `report.html` embeds (the page itself: `treegrpo/report/explorer/`).

Nodes are rows of `FIELDS` (a header once, not a key per value). Plans, code and output tails go
into one string table and nodes name them by index: a text shared by several nodes (a control's
round 1 is token for token its train arm's; a debug step may return its parent's script) is
stored once. The page computes a node's diff against its parent from the two code strings when
the node is opened, so no diff is stored.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Sequence

from treegrpo.advantages import compute as advantages
from treegrpo.archive import GateNodeRecord, NodeRecord
from treegrpo.events import Status
from treegrpo.report._data import LOAD_LINE, NodeText, RunData
from treegrpo.report._metrics import RunMetrics
from treegrpo.report._speed import SpeedTable, cheaper_line, speed_rows, title

FORMAT = 1  # bumped when the page's reading of the document changes
FIELDS = (
    "id",
    "task",
    "round",
    "step",
    "parent",
    "group",
    "mode",
    "status",
    "exc",
    "exec_time",
    "metric",
    "oriented",
    "reward",
    "adv",
    "version",
    "tokens",
    "logprob",
    "plan",
    "code",
    "tail",
    "grade_error",
    "gate",
)
EMPTY = NodeText()


class Strings:
    """A string table: each distinct text once; index 0 is the empty string."""

    def __init__(self) -> None:
        self.items: list[str] = [""]
        self._index: dict[str, int] = {"": 0}

    def add(self, text: str) -> int:
        i = self._index.get(text)
        if i is None:
            i = self._index[text] = len(self.items)
            self.items.append(text)
        return i


def group_advantages(records: Sequence[NodeRecord], estimator: str) -> dict[str, float]:
    """Each node's advantage within its sibling group, by the report's estimator; groups with a
    member that has no reward yet (a round cut short before its `group.scored`) get none."""
    groups: dict[str, list[NodeRecord]] = defaultdict(list)
    for r in records:
        groups[r.sibling_group].append(r)
    out: dict[str, float] = {}
    for members in groups.values():
        if any(m.reward is None for m in members):
            continue
        adv = advantages(estimator, [m.reward for m in members], [m.status for m in members])
        out |= {m.id: round(a, 6) for m, a in zip(members, adv, strict=True)}
    return out


def _gate(r: NodeRecord) -> dict | None:
    if not isinstance(r, GateNodeRecord):
        return None
    return {
        "resources": r.resources,
        "malformed": r.decl_malformed,
        "miss": r.decl_miss_reason,
        "deps_ignored": r.decl_deps_ignored,
        "where": r.where,
        "timings": r.exec_timings,
        "gpu_util": r.gpu_util,
    }


def _best(data: RunData) -> dict[tuple[str, int], str]:
    """The best valid node of each round: the summary's choice, else the highest oriented metric."""
    best: dict[tuple[str, int], NodeRecord] = {}
    for r in data.records:
        key = (r.exp_id, r.round)
        if r.status == Status.OK and r.oriented is not None:
            if key not in best or r.oriented > best[key].oriented:
                best[key] = r
    out = {k: r.id for k, r in best.items()}
    out |= {k: s.best_node_id for k, s in data.summaries.items() if s.best_node_id}
    return out


def _row(r: NodeRecord, data: RunData, adv: dict[str, float], strings: Strings) -> list:
    t = data.texts.get(r.id, EMPTY)
    return [
        r.id,
        r.exp_id,
        r.round,
        r.step,
        r.parent_id,
        r.sibling_group,
        r.mode,
        r.status,
        r.exc_type,
        round(r.exec_time, 3),
        r.test_metric,
        r.oriented,
        r.reward,
        adv.get(r.id),
        data.versions.get(r.id),
        t.tokens,
        None if t.mean_logprob is None else round(t.mean_logprob, 4),
        strings.add(t.plan),
        strings.add(t.code),
        strings.add(t.term_tail or r.term_tail or ""),
        r.grade_error,
        _gate(r),
    ]


def _run(data: RunData, m: RunMetrics, role: str, estimator: str, strings: Strings) -> dict:
    adv = group_advantages(data.records, estimator)
    best = _best(data)
    respent = Counter((d.task, d.round) for d in data.respent if d.siblings)  # zero-variance groups re-spent
    return {
        "id": data.run_id,
        "role": role,
        "source": data.source,
        "gate": data.gate,
        "load": data.load,  # a systems load run: the page shows LOAD_LINE, never a verdict
        "masked": len(data.infrastructure),  # nodes masked by infrastructure faults (not in `nodes`)
        "retried": data.retried,  # node id -> newest attempt: nodes run again (--retry-masked)
        # the seed's files carry no policy version: the loader infers round - 1 (sync), as import does
        "versions": "as node.sampled says" if data.source.startswith("bus:") else "inferred: round - 1",
        "tasks": data.tasks,
        "rounds": [
            {
                "task": row.task,
                "round": row.round,
                "nodes": row.nodes,
                "valid": row.valid,
                "crash_rate": row.crash_rate,
                "best_test_metric": row.best_test_metric,
                "best_id": best.get((row.task, row.round)),
                "respent": respent.get((row.task, row.round), 0),
                "summary": row.from_summary,
            }
            for row in m.rounds
        ],
        "nodes": [_row(r, data, adv, strings) for r in sorted(data.records, key=_order)],
    }


def _order(r: NodeRecord) -> tuple:
    return (r.exp_id, r.round, r.step)  # stable sort: within a group, the members keep their order


def payload(
    runs: Sequence[RunData],
    metrics: Sequence[RunMetrics],
    estimator: str,
    curves: dict | None = None,
    comparison: dict | None = None,
    verdict: str = "",
    speed: SpeedTable | None = None,
    learning_note: str = "",
) -> dict:
    """`runs` and `metrics` in the same order; with a comparison, the last run is the control."""
    strings = Strings()
    roles = ["run"] * len(runs)
    if comparison is not None:
        roles = ["train"] + ["run"] * (len(runs) - 2) + ["control"]
    return {
        "format": FORMAT,
        "title": "treegrpo: " + " vs ".join(d.run_id for d in runs),
        "estimator": estimator,
        "fields": list(FIELDS),
        "runs": [
            _run(d, m, role, estimator, strings) for d, m, role in zip(runs, metrics, roles, strict=True)
        ],
        "curves": curves or {},
        "comparison": None if comparison is None else {**comparison, "line": verdict},
        "learning_note": learning_note,
        "load_line": LOAD_LINE,
        "speed": None if speed is None else _speed(speed),
        "texts": strings.items,
    }


def _speed(t: SpeedTable) -> dict:
    """The speed table as the page shows it: the report's own rows, already formatted."""
    steps = f"the {len(t.steps)} steps both runs logged" if t.steps else "no step logged by both runs"
    return {
        "title": title(t),
        "note": f"Median per step over {steps}. {cheaper_line(t)}".strip(),
        "head": ["phase (median per step)", f"A: {t.run_a}", f"B: {t.run_b}", "B/A"],
        "rows": speed_rows(t) if t.steps else [],
    }
