"""A real run through the containers: `treegrpo run --attach` on the host drives the four services
in their containers to the end; exactly the expected nodes, every journey one trace in the OTLP/JSON
files on the `traces` volume, every node run by the jailed sandbox inside the executor container."""

from __future__ import annotations

import time
from collections import Counter

import pytest

from tests.e2e._harness import export_records, journey, read_log, run_ids
from tests.stack._stack import SERVICES, attached_run, node_outcomes, sampler_backend
from tests.stack.conftest import record
from treegrpo.events import Kind
from treegrpo.telemetry import read_spans

pytestmark = [pytest.mark.stack, pytest.mark.timeout(900)]
TASKS, ROUNDS, E, G = 1, 2, 3, 2  # treegrpo/examples/run-small.toml


def test_a_small_run_through_the_containers_ends_with_exactly_its_nodes_each_journey_one_trace(
    stack, tmp_path
):
    home = tmp_path / "home"
    sampler_backend(stack, "hf")  # the tiny model samples
    started = time.monotonic()
    proc = attached_run(stack, home, "runner.timeout_s=600")
    assert proc.wait(700) == 0, (home / "run.log").read_text()[-5000:]
    wall = time.monotonic() - started
    record("run_small_attached_s", round(wall, 1))
    (run_id,) = run_ids(home)
    n = TASKS * ROUNDS * E * G
    log = read_log(home, run_id, url=stack.operator_url)
    assert log.counts[Kind.RUN_STARTED] == 1 and log.counts[Kind.RUN_COMPLETED] == 1
    assert log.counts[Kind.NODE_SAMPLED] == len(set(log.node_ids)) == n
    assert log.counts[Kind.NODE_EXECUTED] == log.counts[Kind.NODE_GRADED] == n
    assert len(log.groups_scored) == len(set(log.groups_scored)) == TASKS * ROUNDS * E
    assert len(log.steps) == ROUNDS and len(set(log.groups_trained)) == len(log.groups_trained)
    assert log.traced == log.counts, f"events without a traceparent: {log.counts - log.traced}"
    records = export_records(home / "runs" / run_id / "export")
    assert len(records) == n and len({r["id"] for r in records}) == n
    assert (home / "runs" / run_id / "report" / "report.md").exists()

    # every node with code ran in the jailed sandbox inside the executor container (the random tiny
    # model mostly writes none: `no_code` needs no sandbox; tests/stack/test_stack_sandbox.py runs
    # scripts there for certain)
    hostname = stack.inspect("executor")["Config"]["Hostname"]
    outcomes = node_outcomes(stack.operator_url, run_id)
    statuses = Counter(o.status for o in outcomes)
    assert len(outcomes) == n
    assert all(o.where.startswith(f"local:{hostname}/slot") for o in outcomes if o.status != "no_code")
    assert "jailed=True uid-drop=True" in stack.logs("executor")
    record("run_small_statuses", dict(statuses))

    # no collector: each service's spans in its OTLP/JSON file on the traces volume, one trace per journey
    traces = stack.volume_path("traces")
    assert {p.stem for p in traces.glob("*.jsonl")} == set(SERVICES)
    spans = {s["span_id"]: s for svc in SERVICES for s in read_spans(traces / f"{svc}.jsonl")}
    ours = [s for s in spans.values() if s["attributes"].get("treegrpo.run_id") == run_id]
    assert {s["service"] for s in ours} == set(SERVICES)
    learned = [s for s in ours if s["service"] == "learner" and s["name"].endswith(Kind.GROUP_SCORED)]
    assert learned, "the learner recorded no span for a group.scored it consumed"
    for leaf in learned:
        chain = journey(spans, leaf)
        assert [s["service"] for s in chain] == ["learner", "grader", "executor", "sampler"]
        assert len({s["trace_id"] for s in chain}) == 1
    assert all(stack.health(name) == "healthy" for name in SERVICES)
    print(f"{n} nodes {dict(statuses)} through the containers in {wall:.1f}s; {len(ours)} spans in {traces}")
