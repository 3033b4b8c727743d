"""`treegrpo run` end to end: real nats-server, four service processes, a real (tiny) model,
real sandboxed executions, grading, GRPO steps, export and report."""

from __future__ import annotations

import json

import pytest

from tests.e2e._harness import export_records, journey, load_spans, prepare_home, read_log, run_ids, start_run
from treegrpo.events import Kind


@pytest.mark.timeout(600)
def test_small_run_completes_with_every_node_graded_trained_exported_and_reported(tmp_path):
    home = tmp_path / "home"
    model = prepare_home(home)
    proc = start_run(
        home, "treegrpo/examples/run-small.toml", f'sampler.model="{model}"', f'learner.model="{model}"'
    )
    assert proc.wait(540) == 0, (home / "run.log").read_text()[-4000:]
    (run_id,) = run_ids(home)
    log = read_log(home, run_id)
    tasks, rounds, e, g = 1, 2, 3, 2
    assert log.counts[Kind.NODE_SAMPLED] == tasks * rounds * e * g
    assert log.counts[Kind.TOKENS_RECORDED] == tasks * rounds * e * g  # each node's payload, apart
    assert len(set(log.node_ids)) == len(log.node_ids)
    assert log.counts[Kind.NODE_EXECUTED] == log.counts[Kind.NODE_GRADED] == tasks * rounds * e * g
    assert (
        sorted(set(log.groups_scored)) == sorted(log.groups_scored)
        and len(log.groups_scored) == tasks * rounds * e
    )
    assert len(log.steps) == rounds and len(set(log.groups_trained)) == len(log.groups_trained)
    assert log.counts[Kind.POLICY_LOADED] >= rounds - 1  # sync: round r waited for version r-1
    run_dir = home / "runs" / run_id
    records = export_records(run_dir / "export")
    assert len(records) == tasks * rounds * e * g and len({r["id"] for r in records}) == len(records)
    # the export puts each node's payload back into its record, as the seed's records hold it
    assert all(r["response_token_ids"] and r["prompt_messages"] for r in records)
    assert all(len(r["response_logprobs"]) == len(r["response_token_ids"]) for r in records)
    timing = [json.loads(x) for x in (run_dir / "export" / run_id / "timing.jsonl").read_text().splitlines()]
    assert [t["step"] for t in timing] == list(range(1, rounds + 1)) or len(timing) == rounds
    # each round's summary is derived at export from its node events (round.completed is the fact alone)
    summaries = [
        json.loads(p.read_text()) for p in sorted((run_dir / "export" / run_id).glob("round_*/*summary*"))
    ]
    assert [(s["round"], s["nodes"], s["expansions"]) for s in summaries] == [
        (r, e * g, e) for r in range(1, rounds + 1)
    ]
    assert all(s["gen_llm_seconds"] > 0 for s in summaries)  # the tiny model writes no code: exec may be 0
    assert (run_dir / "report" / "report.md").exists()

    # every event of every kind carries trace context, those published outside any span included
    assert log.traced == log.counts, f"events without a traceparent: {log.counts - log.traced}"
    assert {Kind.RUN_STARTED, Kind.POLICY_LOADED, Kind.LEARNER_STEPPED, Kind.RUN_COMPLETED} <= set(log.counts)

    # one node's journey sampler -> executor -> grader -> learner is one trace, in OTLP/JSON files
    spans = load_spans(run_dir)
    assert {p.stem for p in (run_dir / "traces").glob("*.jsonl")} >= {
        "sampler",
        "executor",
        "grader",
        "learner",
    }
    # ... and the facts published by the runner and the learner name spans their trace files hold
    # (the runner's own file; the learner's step span), not roots no viewer can show
    for kind in (Kind.RUN_STARTED, Kind.RUN_ENDED, Kind.RUN_COMPLETED, Kind.LEARNER_STEPPED):
        assert log.parents[kind] <= set(spans), f"{kind}: parent spans missing from the trace files"
    assert {s["name"] for s in spans.values() if s["service"] == "runner"} >= {
        "runner claim run",
        "runner end run",
    }
    learner_spans = [
        s for s in spans.values() if s["service"] == "learner" and s["name"].endswith(Kind.GROUP_SCORED)
    ]
    assert learner_spans, "the learner recorded no span for a group.scored it consumed"
    chain = journey(spans, learner_spans[0])
    assert [s["service"] for s in chain] == ["learner", "grader", "executor", "sampler"], [
        s["name"] for s in chain
    ]
    assert len({s["trace_id"] for s in chain}) == 1
    node = chain[2]["attributes"]["treegrpo.event_id"].rsplit(".", 1)[-1]
    assert chain[1]["attributes"]["treegrpo.event_id"].endswith(f"node.executed.{node}")
