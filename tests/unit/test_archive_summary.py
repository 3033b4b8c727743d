"""Round summaries as a projection of node events (no I/O): order-independence and fallbacks."""

from __future__ import annotations

import pytest

from treegrpo import events
from treegrpo.archive import RunFacts, SampledFacts, node_record, round_summary
from treegrpo.v1 import events_pb2 as pb

pytestmark = pytest.mark.timeout(30)

RUN = "r1"


def _node(step: int, index: int, oriented: float | None, gen: float = 1.0) -> tuple[pb.Event, pb.NodeSampled]:
    nid = events.node_id(RUN, "t", 1, step, index)
    gid = events.group_id(RUN, "t", 1, step)
    g = pb.NodeGraded(
        node_id=nid, task="t", round=1, step=step, sibling_group=gid, status="ok", exec_time=0.1 * (index + 1)
    )
    if oriented is not None:
        g.oriented, g.test_metric = oriented, -oriented  # a lower-is-better metric
    s = pb.NodeSampled(
        node_id=nid,
        task="t",
        round=1,
        step=step,
        sibling_group=gid,
        index_in_group=index,
        gen_seconds=gen,
        model="sampled-model",
    )
    return events.make_event(RUN, "grader", g), s


def _summary(before: list[pb.Event], nodes: list[tuple[pb.Event, pb.NodeSampled]], producer: str = "sampler"):
    facts = RunFacts(RUN)
    for e in [
        *before,
        *(g for g, _ in nodes),
        events.make_event(RUN, producer, pb.RoundCompleted(task="t", round=1, completed_unix=9)),
    ]:
        facts.add(e)
    rf = facts.rounds[("t", 1)]
    records = [node_record(facts.graded[n], None, None, False) for n in rf.node_ids]
    return round_summary(facts, rf, records, {s.node_id: SampledFacts.of(s) for _, s in nodes})


def test_the_best_node_on_a_tie_and_the_sums_do_not_depend_on_the_order_the_nodes_were_read_in():
    nodes = [_node(1, 1, 2.0, 0.1), _node(0, 1, 2.0, 0.2), _node(1, 0, 2.0, 0.3), _node(0, 0, 1.0, 0.4)]
    first = _summary([], nodes)
    assert first.best_node_id == events.node_id(
        RUN, "t", 1, 0, 1
    )  # the first in (step, index) order of the tied
    assert first.best_test_metric == -2.0
    assert _summary([], list(reversed(nodes))) == first


def test_a_round_without_round_started_takes_model_expansions_and_phase_from_its_other_facts():
    spec = pb.RunStarted(run_spec_json='{"phase": "eval", "tree": {"expansions": 5}}')
    s = _summary([events.make_event(RUN, "cli", spec)], [_node(0, 0, None), _node(0, 1, None)])
    assert (s.model, s.expansions, s.phase, s.nodes, s.valid) == ("sampled-model", 5, "eval", 2, 2)
    assert (s.best_node_id, s.best_test_metric, s.gen_llm_seconds) == (None, None, 2.0)


def test_an_imported_round_keeps_the_seeds_own_summary():
    facts = RunFacts(RUN)
    seed = pb.RoundCompleted(
        task="t",
        round=1,
        nodes=7,
        valid=3,
        gen_llm_seconds=12.5,
        honest_test_metric=0.5,
        model="seed-model",
        rollout_file="rollouts/t__1.jsonl",
    )
    facts.add(events.make_event(RUN, events.IMPORTED_PRODUCER, seed))
    s = round_summary(facts, facts.rounds[("t", 1)], [], {})
    assert (s.nodes, s.valid, s.gen_llm_seconds, s.honest_test_metric, s.model, s.rollout_file) == (
        7,
        3,
        12.5,
        0.5,
        "seed-model",
        "rollouts/t__1.jsonl",
    )


def test_a_round_that_has_not_completed_has_no_summary():
    facts = RunFacts(RUN)
    g, _ = _node(0, 0, 1.0)
    facts.add(g)
    assert round_summary(facts, facts.rounds[("t", 1)], [], {}) is None
