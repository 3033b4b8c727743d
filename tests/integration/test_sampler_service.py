"""The sampler service against a real nats-server and a real (tiny, local) model.

The test plays the executor + grader's part of the loop: it consumes `node.sampled` and answers
with `node.executed`, `node.graded` and `group.scored` facts, deterministic per node, so the
sampler's tree policy, round summaries, staleness gate and crash recovery are exercised for real.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import tarfile
from collections import defaultdict

import pytest

from tests.bus_wait import wait_for_fact
from treegrpo import events
from treegrpo.archive import export_runs
from treegrpo.bus import ADAPTERS, STREAM, Consumer
from treegrpo.config import RunSpec
from treegrpo.events import Kind
from treegrpo.v1 import events_pb2 as pb
from treegrpo_sampler import SamplerConfig
from treegrpo_sampler.service import SamplerService

pytestmark = pytest.mark.timeout(120)


def config(tiny, public, nats_server, tmp_path, **kw) -> SamplerConfig:
    return SamplerConfig(
        model=str(tiny),
        nats={"url": nats_server.url},
        workdir=str(tmp_path / "sampler"),
        prompts={"task_roots": [str(public)]},
        sampling={"max_new_tokens": 12},
        grpc={"port": 0, "pull_after_s": 0.3},
        **kw,
    )


async def start(cfg: SamplerConfig, instance: str = "s1"):
    svc = SamplerService(cfg, instance)
    await svc.setup()
    return svc, asyncio.create_task(svc.run())


async def stop(svc, task):
    await svc.stop()
    await task
    await svc.close()


async def kill(svc, task):
    """As abrupt as in-process gets: no drain, no acks, in-flight generation abandoned."""
    svc.stopping.set()
    task.cancel()
    svc.abandon()
    await svc.receiver.stop(0)
    await svc.bus.nc.close()


async def begin(bus, **spec_kw) -> RunSpec:
    spec = RunSpec(**spec_kw)
    body = pb.RunStarted(
        run_spec_json=spec.model_dump_json(),
        tasks=spec.tasks,
        rounds=spec.rounds,
        train=spec.train,
        max_staleness=spec.max_staleness,
    )
    await bus.publish(events.make_event(spec.run_id, "cli/test", body))
    return spec


def outcome(node: pb.NodeSampled) -> tuple[str, float | None]:
    """Deterministic grades: every third sibling is valid, with a metric that depends on its place."""
    ok = node.index_in_group % 3 == 0
    return ("ok", 0.3 + 0.05 * node.index_in_group + 0.01 * node.step) if ok else ("crashed", None)


@contextlib.asynccontextmanager
async def grading(bus):
    """Answer every node.sampled with executed + graded facts, and each full group with group.scored."""
    seen: dict[str, dict[str, pb.NodeSampled]] = defaultdict(dict)

    async def on(event, delivery):
        n = event.node_sampled
        status, metric = outcome(n)
        run = event.envelope.run_id
        ex = pb.NodeExecuted(
            node_id=n.node_id,
            task=n.task,
            round=n.round,
            step=n.step,
            sibling_group=n.sibling_group,
            group_size=n.group_size,
            mode=n.mode,
            status=status,
            exec_time=1.5,
            term_tail="Validation metric: 0.5" if status == "ok" else "ZeroDivisionError: boom",
        )
        gr = pb.NodeGraded(
            node_id=n.node_id,
            task=n.task,
            round=n.round,
            step=n.step,
            sibling_group=n.sibling_group,
            group_size=n.group_size,
            status=status,
            is_buggy=status != "ok",
            exec_time=1.5,
            mode=n.mode,
        )
        if metric is not None:
            gr.test_metric, gr.oriented, gr.source = metric, -metric, "grade"
        await bus.publish_many(
            [events.make_event(run, "executor/test", ex), events.make_event(run, "grader/test", gr)]
        )
        seen[n.sibling_group][n.node_id] = n
        if len(seen[n.sibling_group]) == n.group_size:
            members = [
                pb.GroupMember(
                    node_id=x.node_id,
                    status=outcome(x)[0],
                    reward=(-outcome(x)[1]) if outcome(x)[1] else -0.5,
                )
                for x in sorted(seen[n.sibling_group].values(), key=lambda x: x.index_in_group)
            ]
            body = pb.GroupScored(
                sibling_group=n.sibling_group, task=n.task, round=n.round, step=n.step, members=members
            )
            await bus.publish(events.make_event(run, "grader/test", body))

    stop_ev = asyncio.Event()
    consumer = Consumer(bus, "test-grader", [events.subject_filter(Kind.NODE_SAMPLED)], on)
    task = asyncio.create_task(consumer.run(stop_ev))
    try:
        yield
    finally:
        stop_ev.set()
        await task


async def wait_for(bus, run, kind, key=None, timeout=60.0) -> pb.Event:
    return await wait_for_fact(bus, run, kind, key, timeout, poll_s=0.2)


async def sampled_counts(bus, run) -> dict[str, int]:
    info = await bus.js.stream_info(STREAM, subjects_filter=f"tg.{run}.node.sampled.>")
    return {s.rsplit(".", 1)[1]: c for s, c in (info.state.subjects or {}).items()}


def expected_ids(spec: RunSpec) -> set[str]:
    t = spec.tree
    return {
        events.node_id(spec.run_id, task, r, s, i)
        for task in spec.tasks
        for r in range(1, spec.rounds + 1)
        for s in range(t.expansions)
        for i in range(t.group_size)
    }


async def test_rounds_are_sampled_graded_summarised_and_the_run_completes(
    bus, nats_server, tiny, public, tmp_path
):
    imported = RunSpec(
        run_id="old1", tasks=["spooky-mini"], rounds=1
    )  # history from an archive: never resumed
    await bus.publish(
        events.make_event(
            "old1",
            events.IMPORTED_PRODUCER,
            pb.RunStarted(run_spec_json=imported.model_dump_json(), tasks=imported.tasks, rounds=1),
        )
    )
    svc, task = await start(config(tiny, public, nats_server, tmp_path, max_concurrent_groups=2))
    try:
        async with grading(bus):
            spec = await begin(
                bus,
                run_id="run1",
                tasks=["spooky-mini"],
                rounds=2,
                train=False,
                tree={"expansions": 3, "group_size": 4, "drafts": 2},
            )
            done = await wait_for(bus, "run1", Kind.RUN_COMPLETED)
    finally:
        await stop(svc, task)
    assert done.run_completed.outcome == "completed"
    assert await sampled_counts(bus, "old1") == {} and svc.weights_address.startswith("127.0.0.1:")
    assert (tmp_path / "sampler" / "s1.grpc").read_text().strip() == svc.weights_address
    counts = await sampled_counts(bus, "run1")
    assert set(counts) == expected_ids(spec) and set(counts.values()) == {1}
    await export_runs(bus, ["run1"], tmp_path / "export")  # round summaries are a projection of node events
    for r in (1, 2):
        fact = (await bus.last_event("run1", Kind.ROUND_COMPLETED, ("spooky-mini", str(r)))).round_completed
        assert (fact.nodes, fact.HasField("best_test_metric"), fact.rollout_file) == (
            0,
            False,
            "",
        )  # no copies
        started = (await bus.last_event("run1", Kind.ROUND_STARTED, ("spooky-mini", str(r)))).round_started
        rdir = tmp_path / "export" / "run1" / f"round_{r}"
        summary = json.loads((rdir / f"spooky-mini__summary_{fact.completed_unix}.json").read_text())
        assert (summary["nodes"], summary["valid"], summary["expansions"]) == (
            12,
            6,
            3,
        )  # indices 0, 3 a group
        assert summary["best_node_id"] == events.node_id("run1", "spooky-mini", r, 0, 0)  # lowest metric wins
        assert summary["best_test_metric"] == pytest.approx(0.3)
        assert summary["gen_exec_seconds"] == pytest.approx(18.0) and summary["gen_llm_seconds"] > 0
        assert summary["rollout_file"] == f"round_{r}/spooky-mini__{started.started_unix}.jsonl"
        assert (rdir / f"spooky-mini__{started.started_unix}.jsonl").exists()
    child = (
        await bus.last_event("run1", Kind.NODE_SAMPLED, events.node_id("run1", "spooky-mini", 1, 2, 1))
    ).node_sampled
    assert child.mode in ("debug", "improve") and child.HasField("parent_id") and child.policy_version == 0
    # its training payload is the fact before it: the node fact carries none of it
    assert child.tokens_recorded and not (child.response_token_ids or child.prompt_messages)
    tokens = (await bus.last_event("run1", Kind.TOKENS_RECORDED, child.node_id)).tokens_recorded
    assert len(tokens.response_token_ids) == len(tokens.response_logprobs) > 0 and tokens.prompt_token_ids
    assert [m.role for m in tokens.prompt_messages] == ["system", "user"]
    parent_code = (await bus.last_event("run1", Kind.NODE_SAMPLED, child.parent_id)).node_sampled.code
    assert "Previous" in tokens.prompt_messages[1].content
    if parent_code:
        assert parent_code in tokens.prompt_messages[1].content


async def test_sync_round_waits_for_the_trained_version_which_is_pulled_when_no_push_comes(
    bus, nats_server, tiny, public, tmp_path
):
    svc, task = await start(config(tiny, public, nats_server, tmp_path))
    try:
        async with grading(bus):
            await begin(
                bus,
                run_id="sync1",
                tasks=["spooky-mini"],
                rounds=2,
                train=True,
                max_staleness=0,
                tree={"expansions": 2, "group_size": 2, "drafts": 2},
            )
            await wait_for(bus, "sync1", Kind.ROUND_COMPLETED, ("spooky-mini", "1"))
            await asyncio.sleep(2.0)
            assert await bus.last_event("sync1", Kind.ROUND_STARTED, ("spooky-mini", "2")) is None
            await publish_version(bus, tiny, tmp_path, "sync1", 1)
            started = await wait_for(bus, "sync1", Kind.ROUND_STARTED, ("spooky-mini", "2"))
            await wait_for(bus, "sync1", Kind.RUN_COMPLETED)
    finally:
        await stop(svc, task)
    assert started.round_started.policy_version == 1
    assert (await bus.last_event("sync1", Kind.POLICY_LOADED, ("1", "s1"))) is not None
    node = events.node_id("sync1", "spooky-mini", 2, 0, 0)
    assert (await bus.last_event("sync1", Kind.NODE_SAMPLED, node)).node_sampled.policy_version == 1


async def test_sampler_killed_mid_round_restarts_and_finishes_without_losing_or_duplicating_nodes(
    bus, nats_server, tiny, public, tmp_path
):
    cfg = config(tiny, public, nats_server, tmp_path)
    svc, task = await start(cfg)
    async with grading(bus):
        spec = await begin(
            bus,
            run_id="crash1",
            tasks=["spooky-mini"],
            rounds=1,
            train=False,
            tree={"expansions": 4, "group_size": 4, "drafts": 2},
        )
        while len(await sampled_counts(bus, "crash1")) < 6:  # mid-round: past the drafts' first group
            await asyncio.sleep(0.05)
        await kill(svc, task)
        before = await sampled_counts(bus, "crash1")
        assert len(before) < 16
        assert await bus.last_event("crash1", Kind.ROUND_COMPLETED, ("spooky-mini", "1")) is None
        svc2, task2 = await start(cfg, "s2")
        try:
            await wait_for(bus, "crash1", Kind.ROUND_COMPLETED, ("spooky-mini", "1"))
            await wait_for(bus, "crash1", Kind.RUN_COMPLETED)
        finally:
            await stop(svc2, task2)
    counts = await sampled_counts(bus, "crash1")
    assert set(counts) == expected_ids(spec) and set(counts.values()) == {1}
    [exported] = await export_runs(bus, ["crash1"], tmp_path / "export")
    summary = json.loads(next((tmp_path / "export" / "crash1" / "round_1").glob("*summary*")).read_text())
    assert summary["nodes"] == exported.nodes == 16
    assert await bus.last_event("crash1", Kind.ROUND_STARTED, ("spooky-mini", "1")) is not None


async def publish_version(bus, tiny, tmp_path, run: str, version: int) -> None:
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    torch.manual_seed(version)
    peft = get_peft_model(
        AutoModelForCausalLM.from_pretrained(tiny),
        LoraConfig(r=4, target_modules=["q_proj", "v_proj"], init_lora_weights=False),
    )
    out = tmp_path / f"v{version}"
    peft.save_pretrained(out)
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for f in sorted(out.iterdir()):
            tar.add(f, arcname=f.name)
    key = f"{run}/v{version}.tar"
    sha, size = await bus.put_object(ADAPTERS, key, buf.getvalue())
    body = pb.PolicyPublished(version=version, adapter_key=key, sha256=sha, bytes=size, step=version)
    await bus.publish(events.make_event(run, "learner/test", body))


async def test_with_staleness_one_the_next_round_starts_before_the_trained_version_exists(
    bus, nats_server, tiny, public, tmp_path
):
    svc, task = await start(config(tiny, public, nats_server, tmp_path, max_concurrent_groups=2))
    try:
        async with grading(bus):
            await begin(
                bus,
                run_id="async1",
                tasks=["spooky-mini"],
                rounds=3,
                train=True,
                max_staleness=1,
                tree={"expansions": 2, "group_size": 2, "drafts": 1},
            )
            await wait_for(bus, "async1", Kind.ROUND_COMPLETED, ("spooky-mini", "2"))
            await asyncio.sleep(1.5)
            # round 3 needs v1
            assert await bus.last_event("async1", Kind.ROUND_STARTED, ("spooky-mini", "3")) is None
    finally:
        await stop(svc, task)
    seqs = {}
    async for seq, ev in bus.replay("async1", [Kind.ROUND_STARTED, Kind.ROUND_COMPLETED]):
        seqs[(events.kind_of(ev), events.body_of(ev).round)] = seq
    assert seqs[(Kind.ROUND_STARTED, 2)] < seqs[(Kind.ROUND_COMPLETED, 1)]  # round 2 overlapped round 1
    round2 = await bus.last_event("async1", Kind.ROUND_STARTED, ("spooky-mini", "2"))
    assert round2.round_started.policy_version == 0
