"""Round summaries as a projection: the seed's summary of a round, derived from the round's node events.

The log is the source of truth: a live `round.completed` says only that a round ended (task, round,
`completed_unix`), and every other summary field is computed here from the facts it summarises
(`round.started`, `node.sampled`, `node.graded`, the run spec). An imported round is the exception:
its `round.completed` carries the seed's own summary, which is kept verbatim (the seed recorded
numbers its node files cannot give back, e.g. `gen_llm_seconds` and `honest_test_metric`).

Nodes are visited in (step, index_in_group) order, the order the sampler samples them in, so the
best node on a tie and the float sums are the same whichever order the events were read in.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import orjson

from treegrpo.archive._join import RoundFacts, RunFacts
from treegrpo.archive._schema import NodeRecord, RoundSummary
from treegrpo.config.run import RunSpec
from treegrpo.events import Status
from treegrpo.v1 import events_pb2 as pb

DEFAULT_PHASE = RunSpec.model_fields["phase"].default


@dataclass(frozen=True, slots=True)
class SampledFacts:
    """What a round summary needs of one `node.sampled`: its place in its group and its generation time."""

    index_in_group: int
    gen_seconds: float
    model: str

    @classmethod
    def of(cls, s: pb.NodeSampled) -> SampledFacts:
        return cls(s.index_in_group, s.gen_seconds, s.model)


def _spec_value(started: pb.RunStarted | None, key: str):
    """One key of the run spec in `run.started` (read as JSON: a spec an older version wrote may not
    validate against today's `RunSpec`, and the summary needs only two of its values)."""
    if started is None or not started.run_spec_json:
        return None
    return orjson.loads(started.run_spec_json).get(key)


def seed_summary(c: pb.RoundCompleted) -> RoundSummary:
    """An imported round's summary, as the seed wrote it."""
    return RoundSummary(
        exp_id=c.task,
        round=c.round,
        model=c.model,
        adapter_path=c.adapter_path,
        nodes=c.nodes,
        valid=c.valid,
        expansions=c.expansions,
        phase=c.phase,
        best_test_metric=c.best_test_metric if c.HasField("best_test_metric") else None,
        best_node_id=c.best_node_id or None,
        honest_test_metric=c.honest_test_metric if c.HasField("honest_test_metric") else None,
        rollout_file=c.rollout_file,
        workspace=c.workspace,
        gen_llm_seconds=c.gen_llm_seconds,
        gen_exec_seconds=c.gen_exec_seconds,
    )


def round_summary(
    facts: RunFacts, rf: RoundFacts, records: Sequence[NodeRecord], sampled: Mapping[str, SampledFacts]
) -> RoundSummary | None:
    """The round's summary: none before `round.completed`, the seed's own for an imported round,
    else derived from the round's facts (`derive_summary`)."""
    if rf.completed is None:
        return None
    if rf.imported:
        return seed_summary(rf.completed)
    return derive_summary(facts, rf, records, sampled)


def derive_summary(
    facts: RunFacts, rf: RoundFacts, records: Sequence[NodeRecord], sampled: Mapping[str, SampledFacts]
) -> RoundSummary:
    """A live round's summary from its node records (its graded facts) and their `node.sampled` facts;
    `sampled` may lack a node whose `node.sampled` never came (it adds no generation time)."""
    late = len(records)  # a node with no sampled fact sorts after its group's sampled ones

    def order(r: NodeRecord) -> tuple[int, int, str]:
        s = sampled.get(r.id)
        return r.step, s.index_in_group if s else late, r.id

    ordered = sorted(records, key=order)
    best: NodeRecord | None = None
    for r in ordered:
        if (
            r.status == Status.OK
            and r.oriented is not None
            and r.test_metric is not None
            and (best is None or r.oriented > best.oriented)
        ):
            best = r
    st = rf.started
    if st is not None:
        model, expansions = st.model, st.expansions
    else:  # a log cut short: the nodes' model and the run's tree shape
        model = next((sampled[r.id].model for r in ordered if r.id in sampled), "")
        expansions = (_spec_value(facts.started, "tree") or {}).get("expansions", 0)
    return RoundSummary(
        exp_id=rf.task,
        round=rf.round,
        model=model,
        adapter_path=st.adapter_path if st is not None else "",
        nodes=len(records),
        valid=sum(r.status == Status.OK for r in records),
        expansions=expansions,
        phase=_spec_value(facts.started, "phase") or DEFAULT_PHASE,
        best_test_metric=best.test_metric if best else None,
        best_node_id=best.id if best else None,
        honest_test_metric=None,
        rollout_file=f"round_{rf.round}/{rf.task}__{facts.started_unix(rf)}.jsonl",
        workspace=f"{facts.run_id}/round_{rf.round}/{rf.task}",
        gen_llm_seconds=sum(sampled[r.id].gen_seconds for r in ordered if r.id in sampled),
        gen_exec_seconds=sum(r.exec_time for r in ordered),
    )
