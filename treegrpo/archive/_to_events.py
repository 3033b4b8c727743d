"""Turn a seed-format run into the events our services would have published (no I/O).

Each record becomes `node.sampled` + `node.executed` + `node.graded`; each sibling group one
`group.scored` (`partial = true` when the round stopped mid-group, so the recorded rewards of the
members present survive); each round `round.started` (and `round.completed` when it has a
summary); each timing line one `learner.step`. Ids are the usual deterministic ones, envelope
times come from the file names, so importing the same root twice yields identical events.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Sequence

from treegrpo import events
from treegrpo.archive._schema import (
    EXEC_TIMING_KEYS,
    PHASES,
    RESOURCE_KEYS,
    GateNodeRecord,
    NodeRecord,
    TimingLine,
)
from treegrpo.config.run import RunSpec, TreeSettings
from treegrpo.events import Status
from treegrpo.v1 import events_pb2 as pb

PRODUCER = events.IMPORTED_PRODUCER  # services tell imported history from live work by this producer


def run_started(
    run_id: str,
    tasks: list[str],
    rounds: int,
    expansions: int,
    group_size: int,
    gate: bool,
    train: bool,
    model: str,
) -> pb.RunStarted:
    tree = TreeSettings.model_construct(
        expansions=expansions, group_size=group_size, drafts=2, parent_temperature=1.0
    )
    spec = RunSpec.model_construct(
        run_id=run_id, tasks=tasks, rounds=rounds, tree=tree, train=train, resource_gate=gate, model=model
    )
    return pb.RunStarted(
        run_spec_json=spec.model_dump_json(),
        tasks=tasks,
        rounds=rounds,
        train=train,
        max_staleness=0,
        resource_gate=gate,
    )


def _set_opt(msg, name: str, value) -> None:
    if value is not None:
        setattr(msg, name, value)


def node_events(
    run_id: str, rec: NodeRecord, group_size: int, index: int, model: str, at: float
) -> list[pb.Event]:
    s = pb.NodeSampled(
        node_id=rec.id,
        task=rec.exp_id,
        round=rec.round,
        step=rec.step,
        sibling_group=rec.sibling_group,
        mode=rec.mode,
        group_size=group_size,
        index_in_group=index,
        raw_completion=rec.raw_completion,
        thinking=rec.thinking,
        plan=rec.plan,
        code=rec.code,
        policy_version=max(rec.round - 1, 0),
        sampler_id=PRODUCER,
        model=model,
    )
    _set_opt(s, "parent_id", rec.parent_id)
    s.prompt_messages.extend(pb.ChatMessage(role=m.role, content=m.content) for m in rec.prompt_messages)
    s.response_token_ids.extend(rec.response_token_ids)
    s.response_logprobs.extend(rec.response_logprobs)
    # the executor's own status: an invalid submission still ran and wrote a file
    ran = Status.OK if rec.status == Status.INVALID_SUBMISSION else rec.status
    x = pb.NodeExecuted(
        node_id=rec.id,
        task=rec.exp_id,
        round=rec.round,
        step=rec.step,
        sibling_group=rec.sibling_group,
        group_size=group_size,
        mode=rec.mode,
        status=ran,
        exec_time=rec.exec_time,
        term_tail=rec.term_tail,
    )
    _set_opt(x, "parent_id", rec.parent_id)
    _set_opt(x, "exc_type", rec.exc_type)
    if isinstance(rec, GateNodeRecord):
        _fill_gate(x, rec)
    g = pb.NodeGraded(
        node_id=rec.id,
        task=rec.exp_id,
        round=rec.round,
        step=rec.step,
        sibling_group=rec.sibling_group,
        group_size=group_size,
        status=rec.status,
        is_buggy=rec.is_buggy,
        source=rec.source or "",
        exec_time=rec.exec_time,
        mode=rec.mode,
    )
    for name in ("test_metric", "oriented", "grade_error", "parent_id"):
        _set_opt(g, name, getattr(rec, name))
    return [events.make_event(run_id, PRODUCER, body, at=at) for body in (s, x, g)]


def _fill_gate(x: pb.NodeExecuted, rec: GateNodeRecord) -> None:
    x.resource_gate = True
    if rec.resources is not None:
        x.resources.SetInParent()  # an empty declaration {} is still a declaration
        for k in RESOURCE_KEYS:
            _set_opt(x.resources, k, rec.resources.get(k))
    x.decl_malformed, x.decl_deps_ignored = rec.decl_malformed, rec.decl_deps_ignored
    _set_opt(x, "decl_miss_reason", rec.decl_miss_reason)
    x.where = rec.where or ""
    if rec.exec_timings is not None:
        x.exec_timings.SetInParent()
        for k in EXEC_TIMING_KEYS:
            setattr(x.exec_timings, k, rec.exec_timings.get(k, 0.0))
    _set_opt(x, "gpu_util", rec.gpu_util)


def group_events(
    run_id: str, records: Sequence[NodeRecord], group_size: int, at: float
) -> Iterator[pb.Event]:
    """One `group.scored` per sibling group, members in record order; nodes with no reward are left out."""
    groups: dict[str, list[NodeRecord]] = {}
    for r in records:
        groups.setdefault(r.sibling_group, []).append(r)
    for gid, members in groups.items():
        first = members[0]
        body = pb.GroupScored(
            sibling_group=gid,
            task=first.exp_id,
            round=first.round,
            step=first.step,
            partial=len(members) < group_size,
        )
        for m in members:
            if m.reward is None:
                continue
            member = body.members.add(node_id=m.id, reward=m.reward, status=m.status)
            _set_opt(member, "oriented", m.oriented)
        yield events.make_event(run_id, PRODUCER, body, at=at)


def group_size_of(records: Sequence[NodeRecord]) -> int:
    """G: the largest sibling group of the run (a partial round's groups are smaller, never larger)."""
    sizes = Counter(r.sibling_group for r in records)
    return max(sizes.values(), default=0)


def step_event(run_id: str, line: TimingLine, duplicate: int, at: float) -> pb.Event:
    """A repeated step number (a step logged twice) keeps its own event: key `<step>.dup<n>`."""
    body = pb.LearnerStepped(step=line.step, total_s=line.total_s, policy_version=line.step)
    for k in PHASES:
        _set_opt(body.phases_s, k, line.phases_s.get(k))
    key = (str(line.step), f"dup{duplicate}") if duplicate else str(line.step)
    return events.make_event(run_id, PRODUCER, body, key=key, at=at)
