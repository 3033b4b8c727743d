"""The seed's record formats: key order, JSON types, rendered views, invariants, lenient reading."""

from __future__ import annotations

import json
from pathlib import Path

import orjson
import pytest

from tests.archive_gen import SMALL_PLAN, generate
from treegrpo.archive import (
    GATE_NODE_KEYS,
    NODE_KEYS,
    GateNodeRecord,
    NodeRecord,
    RoundSummary,
    TimingLine,
    check_round,
    check_timing,
    find_runs,
    node_json,
    parse_node,
    read_nodes,
    read_run,
    render_transcript,
    render_tree,
)

SEED_25 = [
    "id",
    "step",
    "round",
    "exp_id",
    "parent_id",
    "sibling_group",
    "mode",
    "plan",
    "code",
    "raw_completion",
    "thinking",
    "prompt_messages",
    "response_token_ids",
    "response_logprobs",
    "exc_type",
    "exec_time",
    "term_tail",
    "is_buggy",
    "status",
    "grade_error",
    "test_metric",
    "oriented",
    "reward",
    "source",
    "n_children",
]
SEED_GATE = [
    "resources",
    "decl_malformed",
    "decl_miss_reason",
    "decl_deps_ignored",
    "where",
    "exec_timings",
    "gpu_util",
]


@pytest.fixture(scope="module")
def root(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("seedroot")
    generate(out, "small")
    return out


def _node(**kw) -> NodeRecord:
    base = dict(
        id="aaaaaaaaaaaa", step=0, round=1, exp_id="t", parent_id=None, sibling_group="g0", mode="draft"
    )
    return NodeRecord(**(base | kw))


def test_node_records_serialise_in_the_seeds_key_order_with_nulls_and_integer_resources():
    assert list(NODE_KEYS) == SEED_25 and list(GATE_NODE_KEYS) == SEED_25 + SEED_GATE
    plain = orjson.loads(node_json(_node(status="crashed", exc_type="ValueError")))
    assert list(plain) == SEED_25 and plain["parent_id"] is None and plain["n_children"] == 0
    gate = GateNodeRecord(
        id="b" * 12,
        step=2,
        round=1,
        exp_id="t",
        parent_id="a" * 12,
        sibling_group="g",
        mode="debug",
        resources={"cpu": 8, "mem": 16, "ephemeral": 4, "gpu": 1},
    )
    raw = node_json(gate)
    assert list(orjson.loads(raw)) == SEED_25 + SEED_GATE
    assert b'"resources":{"cpu":8,"mem":16,"ephemeral":4,"gpu":1}' in raw
    assert raw == node_json(gate) and raw.endswith(b"\n")


def test_parsed_seed_line_serialises_back_to_the_same_values(root):
    line = next((root / "s32_full" / "round_1").glob("*[0-9].jsonl")).read_text().splitlines()[0]
    original = json.loads(line)
    assert json.loads(node_json(parse_node(original))) == original


def test_reader_handles_both_schemas_stub_rounds_partial_rounds_and_missing_timing(root):
    runs = {p.name: read_run(p) for p in find_runs(root)}
    assert sorted(runs) == sorted(p.run_id for p in SMALL_PLAN)
    full = runs["s25_full"]
    assert [(r.round, r.summary is not None) for r in full.rounds] == [(1, True), (2, True), (3, False)]
    assert read_nodes(full.rounds[2], full.problems) == []  # the empty stub file
    partial = runs["s25_partial"]
    last = read_nodes(partial.rounds[-1], partial.problems)
    assert len(last) == 6 and partial.rounds[-1].summary is None
    assert [t.step for t in partial.timing] == [1, 1]  # a step logged twice stays twice
    gate_nodes = read_nodes(runs["s32_full"].rounds[0], [])
    assert all(isinstance(r, GateNodeRecord) for r in gate_nodes)
    assert runs["s32_partial"].timing == []
    assert all(not r.problems for r in runs.values())


def test_malformed_lines_are_reported_with_file_and_line_and_skipped(tmp_path):
    generate(tmp_path, "small")
    node_file = next((tmp_path / "s25_full" / "round_1").glob("*[0-9].jsonl"))
    lines = node_file.read_text().splitlines()
    broken = json.loads(lines[1])
    del broken["status"]
    lines[1] = json.dumps(broken)
    lines.insert(3, "{not json")
    node_file.write_text("\n".join(lines) + "\n")
    run = read_run(tmp_path / "s25_full")
    records = read_nodes(run.rounds[0], run.problems)
    assert len(records) == 15
    msgs = [str(p) for p in run.problems]
    assert any(f"{node_file}:2:" in m and "status" in m for m in msgs)
    assert any(f"{node_file}:4:" in m and "not JSON" in m for m in msgs)


def test_tree_view_indents_the_expansion_chain_and_names_each_node():
    a = _node(id="a" * 12, status="ok", test_metric=0.5, sibling_group="g0")
    b = _node(
        id="b" * 12,
        step=2,
        parent_id="a" * 12,
        mode="improve",
        status="crashed",
        exc_type="KeyError",
        sibling_group="g2",
    )
    c = _node(
        id="c" * 12,
        step=3,
        parent_id="b" * 12,
        mode="debug",
        status="ok",
        test_metric=0.25,
        sibling_group="g3",
    )
    tree = render_tree([a, b, c]).splitlines()
    assert tree == [
        f"[{'a' * 12}] draft ok test=0.5 sib_grp=g0",
        f"  [{'b' * 12}] improve crashed test=None sib_grp=g2",
        f"    [{'c' * 12}] debug ok test=0.25 sib_grp=g3",
    ]
    md = render_transcript("t", 1, [a, b, c])
    assert "nodes: 3 · valid: 2" in md
    assert "|- bbbbbbbb step 2 improve crashed (KeyError)" in md


def test_invariants_catch_wrong_counts_best_node_and_phase_sums():
    recs = [_node(id="a" * 12, status="ok", test_metric=0.7), _node(id="b" * 12, status="crashed")]
    good = RoundSummary("t", 1, "m", "", 2, 1, 4, "train", 0.7, "a" * 12, None, "r", "w", 1.0, 2.0)
    assert check_round("r", good, recs) == []
    bad = RoundSummary("t", 1, "m", "", 3, 2, 4, "train", 0.9, "a" * 12, None, "r", "w", 1.0, 2.0)
    found = " ".join(str(v) for v in check_round("r", bad, recs))
    assert "nodes=3" in found and "valid=2" in found and "best_test_metric=0.9" in found
    ok_line = TimingLine(1, 100.0, {"gen": 90.0, "update_actor": 9.5})
    off_line = TimingLine(2, 100.0, {"gen": 50.0})
    assert [v.where for v in check_timing("r", [ok_line, off_line])] == ["timing.jsonl step 2"]
