"""Test support: publish the facts a learner consumes (run.started, node.sampled, group.scored)
for a synthetic run, the way sampler and grader would. Used by the learner's tests."""

from __future__ import annotations

import random
from collections.abc import Sequence

from treegrpo import events
from treegrpo.bus import Bus
from treegrpo.config import RunSpec, TreeSettings
from treegrpo.events import Kind
from treegrpo.v1 import events_pb2 as pb


def run_spec(
    run_id: str,
    tasks: Sequence[str],
    expansions: int,
    group_size: int,
    max_staleness: int = 0,
    rounds: int = 2,
) -> RunSpec:
    return RunSpec(
        run_id=run_id,
        tasks=list(tasks),
        rounds=rounds,
        max_staleness=max_staleness,
        tree=TreeSettings(expansions=expansions, group_size=group_size, drafts=1),
    )


async def start_run(bus: Bus, spec: RunSpec) -> None:
    body = pb.RunStarted(
        run_spec_json=spec.model_dump_json(),
        tasks=spec.tasks,
        rounds=spec.rounds,
        train=spec.train,
        max_staleness=spec.max_staleness,
    )
    await bus.publish(events.make_event(spec.run_id, "test/cli", body))


async def scored_group(
    bus: Bus,
    run_id: str,
    task: str,
    round_: int,
    step: int,
    rewards: Sequence[float],
    statuses: Sequence[str] | None = None,
    version: int = 0,
    vocab: int = 96,
    prompt_len: int = 6,
    response_len: int = 5,
    seed: int = 0,
    empty: Sequence[int] = (),
    inline: bool = False,
) -> str:
    """Publish G nodes (each its tokens.recorded, then its node.sampled, as the sampler does; with
    `inline`, node.sampled facts carrying the payload, as runs recorded before the split and
    imported runs hold it) and then the group's group.scored; returns the group id."""
    rng = random.Random(f"{run_id}/{task}/{round_}/{step}/{seed}")
    group = events.group_id(run_id, task, round_, step)
    statuses = list(statuses or ["ok"] * len(rewards))
    prompt = [rng.randrange(3, vocab) for _ in range(prompt_len)]
    members = []
    for i, (reward, status) in enumerate(zip(rewards, statuses, strict=True)):
        node = events.node_id(run_id, task, round_, step, i)
        resp = [] if i in empty else [rng.randrange(3, vocab) for _ in range(response_len + i % 3)]
        body = pb.NodeSampled(
            node_id=node,
            task=task,
            round=round_,
            step=step,
            sibling_group=group,
            mode="draft",
            group_size=len(rewards),
            index_in_group=i,
            response_token_ids=resp,
            response_logprobs=[-4.5] * len(resp),
            policy_version=version,
            prompt_token_ids=prompt,
        )
        if not inline:
            await bus.publish(events.make_event(run_id, "test/sampler", _payload_apart(body)))
        await bus.publish(events.make_event(run_id, "test/sampler", body))
        members.append(pb.GroupMember(node_id=node, reward=reward, status=status))
    body = pb.GroupScored(sibling_group=group, task=task, round=round_, step=step, members=members)
    await bus.publish(events.make_event(run_id, "test/grader", body))
    return group


def _payload_apart(body: pb.NodeSampled) -> pb.TokensRecorded:
    """The node's payload as its own fact; `body` keeps none of it and says so."""
    place = ("node_id", "task", "round", "step", "sibling_group", "group_size", "index_in_group")
    payload = ("prompt_messages", "prompt_token_ids", "response_token_ids", "response_logprobs")
    tokens = pb.TokensRecorded(**{f: getattr(body, f) for f in place})
    for f in payload:
        getattr(tokens, f).extend(getattr(body, f))
        body.ClearField(f)
    body.tokens_recorded = True
    return tokens


async def learner_steps(bus: Bus, run_id: str) -> list[pb.LearnerStepped]:
    out = [e.learner_stepped async for _s, e in bus.replay(run_id, kinds=[Kind.LEARNER_STEPPED])]
    return sorted(out, key=lambda r: r.step)
