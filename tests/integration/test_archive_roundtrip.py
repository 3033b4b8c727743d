"""Export and import against a real nats-server: layout, invariants, determinism, round trips."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from tests.archive_gen import generate
from treegrpo import events
from treegrpo.archive import ArchiveInvariantError, export_runs, import_root
from treegrpo.bus import STREAM
from treegrpo.events import Kind
from treegrpo.v1 import events_pb2 as pb

pytestmark = pytest.mark.timeout(90)


def _tree_hashes(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def _jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


async def _messages(bus) -> int:
    return (await bus.js.stream_info(STREAM)).state.messages


async def test_import_then_export_round_trips_every_record_summary_and_timing_line(bus, tmp_path):
    src = tmp_path / "seed"
    generate(src, "small")
    results = await import_root(bus, src)
    assert all(not r.problems for r in results)
    out = tmp_path / "out"
    exported = await export_runs(bus, [r.run_id for r in results], out)
    assert all(not e.violations for e in exported)
    for src_file in sorted(src.rglob("*.jsonl")):
        rel = src_file.relative_to(src)
        assert _jsonl(out / rel) == _jsonl(src_file), rel  # field for field, line for line
    for src_file in sorted(src.rglob("*__summary_*.json")):
        assert json.loads((out / src_file.relative_to(src)).read_text()) == json.loads(src_file.read_text())
    # the layout is the seed's: same files (views included), stub round empty, no summary for partial rounds
    assert sorted(p.relative_to(src) for p in src.rglob("*") if p.is_file()) == sorted(
        p.relative_to(out) for p in out.rglob("*") if p.is_file()
    )
    stub = next((out / "s25_full" / "round_3").iterdir())
    assert stub.stat().st_size == 0 and len(list(stub.parent.iterdir())) == 1
    assert not list((out / "s25_partial" / "round_2").glob("*summary*"))
    assert not (out / "s32_partial" / "timing.jsonl").exists()


async def test_reimport_adds_nothing_and_export_is_byte_identical(bus, tmp_path):
    src = tmp_path / "seed"
    generate(src, "small")
    first = await import_root(bus, src)
    count = await _messages(bus)
    again = await import_root(bus, src)
    assert sum(r.events for r in again) == 0 and sum(r.existing for r in again) == sum(
        r.events for r in first
    )
    assert await _messages(bus) == count
    ids = [r.run_id for r in first]
    await export_runs(bus, ids, tmp_path / "a")
    await export_runs(bus, ids, tmp_path / "b")
    assert _tree_hashes(tmp_path / "a") == _tree_hashes(tmp_path / "b")


async def test_partial_groups_keep_their_recorded_rewards(bus, tmp_path):
    src = tmp_path / "seed"
    generate(src, "small")
    await import_root(bus, src)
    groups = [e.group_scored async for _, e in bus.replay("s25_partial", kinds=[Kind.GROUP_SCORED])]
    partial = [g for g in groups if g.partial]
    assert len(partial) == 1 and len(partial[0].members) == 2  # 6 nodes = one full group of 4 + 2
    node_file = next((src / "s25_partial" / "round_2").glob("*[0-9].jsonl"))
    recorded = {r["id"]: r["reward"] for r in _jsonl(node_file)}
    assert {m.node_id: m.reward for m in partial[0].members}.items() <= recorded.items()


async def test_malformed_lines_are_reported_and_the_rest_imported(bus, tmp_path):
    src = tmp_path / "seed"
    generate(src, "small")
    node_file = next((src / "s25_full" / "round_1").glob("*[0-9].jsonl"))
    with open(node_file, "a") as fh:
        fh.write('{"id": "truncated line\n')
    results = {r.run_id: r for r in await import_root(bus, src)}
    problems = [str(p) for p in results["s25_full"].problems]
    assert problems == [p for p in problems if f"{node_file}:17:" in p] and len(problems) == 1
    assert results["s25_full"].nodes == 32


def _live_run(run: str) -> list[pb.Event]:
    """The events services publish for one tiny round: 2 groups of 2, one node still in flight."""
    spec = pb.RunStarted(
        run_spec_json='{"phase": "eval"}', tasks=["t"], rounds=1, train=True, resource_gate=True
    )
    started = pb.RoundStarted(
        task="t", round=1, started_unix=1700000000, model="m0", expansions=2, group_size=2
    )
    out = [events.make_event(run, "cli", spec, at=1.0), events.make_event(run, "sampler", started, at=1.0)]
    graded = []
    for step in range(2):
        gid = events.group_id(run, "t", 1, step)
        group = pb.GroupScored(sibling_group=gid, task="t", round=1, step=step)
        for i in range(2):
            nid = events.node_id(run, "t", 1, step, i)
            ok = i == 0
            s = pb.NodeSampled(
                node_id=nid,
                task="t",
                round=1,
                step=step,
                sibling_group=gid,
                mode="draft",
                code=f"print({i})",
                response_token_ids=[1, 2],
                response_logprobs=[-0.5, -0.25],
                index_in_group=i,
                gen_seconds=0.25 * (step + 1),
            )
            x = pb.NodeExecuted(
                node_id=nid,
                task="t",
                round=1,
                step=step,
                sibling_group=gid,
                mode="draft",
                status="ok" if ok else "crashed",
                exc_type=None if ok else "ValueError",
                resource_gate=True,
                where="local:w1",
            )
            x.resources.gpu, x.resources.mem = 1.0, 0.5
            g = pb.NodeGraded(
                node_id=nid,
                task="t",
                round=1,
                step=step,
                sibling_group=gid,
                mode="draft",
                status="ok" if ok else "crashed",
                is_buggy=not ok,
                source="grade" if ok else "none",
                exec_time=1.5,
            )
            if ok:
                g.test_metric, g.oriented = 0.5 + step, 0.5 + step
            group.members.add(node_id=nid, reward=0.9 if ok else -0.5, status=g.status)
            out += [
                events.make_event(run, "sampler", s, at=2.0),
                events.make_event(run, "executor", x, at=3.0),
            ]
            graded.append(events.make_event(run, "grader", g, at=4.0))
        graded.append(events.make_event(run, "grader", group, at=5.0))
    late = pb.NodeSampled(node_id="f" * 12, task="t", round=1, step=2, sibling_group="g9", mode="debug")
    done = pb.RoundCompleted(task="t", round=1, completed_unix=1700000100)  # the fact alone, as sampled
    step = pb.LearnerStepped(step=1, total_s=10.0)
    step.phases_s.gen, step.phases_s.update_actor = 8.0, 1.9
    return (
        out
        + list(reversed(graded))
        + [
            events.make_event(run, "sampler", late, at=6.0),
            events.make_event(run, "sampler", done, at=7.0),
            events.make_event(run, "learner", step, at=8.0),
        ]
    )


async def test_export_of_a_live_run_joins_the_facts_into_the_seed_layout(bus, tmp_path):
    await bus.publish_many(_live_run("live1"))
    [res] = await export_runs(bus, ["live1"], tmp_path)
    assert (res.nodes, res.ungraded_skipped, res.violations) == (4, 1, [])
    rdir = tmp_path / "live1" / "round_1"
    assert sorted(p.name for p in rdir.iterdir()) == [
        "t__1700000000.jsonl",
        "t__1700000000__transcript.md",
        "t__1700000000__tree.txt",
        "t__summary_1700000100.json",
    ]
    rows = _jsonl(rdir / "t__1700000000.jsonl")
    assert [(r["step"], r["status"]) for r in rows] == [(0, "ok"), (0, "crashed"), (1, "ok"), (1, "crashed")]
    assert len(rows[0]) == 32 and rows[0]["resources"] == {"mem": 0.5, "gpu": 1} and rows[0]["reward"] == 0.9
    assert (
        rows[1]["exc_type"] == "ValueError" and rows[1]["test_metric"] is None and rows[0]["n_children"] == 0
    )
    assert _jsonl(tmp_path / "live1" / "timing.jsonl") == [
        {"step": 1, "total_s": 10.0, "phases_s": {"gen": 8.0, "update_actor": 1.9}}
    ]


async def test_a_live_rounds_summary_is_derived_from_its_node_events(bus, tmp_path):
    """round.completed carries no summary: every key comes from round.started, the nodes and run.started."""
    await bus.publish_many(_live_run("live3"))
    await export_runs(bus, ["live3"], tmp_path)
    summary = json.loads((tmp_path / "live3" / "round_1" / "t__summary_1700000100.json").read_text())
    assert summary == {
        "exp_id": "t",
        "round": 1,
        "model": "m0",
        "adapter_path": "",
        "nodes": 4,
        "valid": 2,
        "expansions": 2,
        "phase": "eval",
        "best_test_metric": 1.5,
        "best_node_id": events.node_id("live3", "t", 1, 1, 0),
        "honest_test_metric": None,
        "rollout_file": "round_1/t__1700000000.jsonl",
        "workspace": "live3/round_1/t",
        "gen_llm_seconds": 1.5,
        "gen_exec_seconds": 6.0,
    }


async def test_a_live_round_completed_carrying_stale_copies_does_not_override_the_node_events(bus, tmp_path):
    events = _live_run("live4")
    for e in events:
        if e.WhichOneof("body") == "round_completed":  # an older sampler's copies, wrong here
            e.round_completed.valid, e.round_completed.nodes, e.round_completed.best_node_id = 3, 9, "x"
    await bus.publish_many(events)
    [res] = await export_runs(bus, ["live4"], tmp_path)
    summary = json.loads((tmp_path / "live4" / "round_1" / "t__summary_1700000100.json").read_text())
    assert (summary["nodes"], summary["valid"], res.violations) == (4, 2, [])


async def test_export_refuses_a_run_that_breaks_the_seeds_invariants(bus, tmp_path):
    run_events = _live_run("live2")
    for i, e in enumerate(run_events):
        if e.WhichOneof("body") == "round_completed":  # only imported rounds carry a summary to check
            summary = pb.RoundCompleted(
                task="t", round=1, nodes=4, valid=3, expansions=2, phase="train", completed_unix=1700000100
            )
            run_events[i] = events.make_event("live2", events.IMPORTED_PRODUCER, summary, at=7.0)
    await bus.publish_many(run_events)
    with pytest.raises(ArchiveInvariantError, match="valid=3"):
        await export_runs(bus, ["live2"], tmp_path)
    assert (tmp_path / "live2" / "round_1").is_dir()  # written for inspection
    with pytest.raises(LookupError):
        await export_runs(bus, ["nope"], tmp_path)
