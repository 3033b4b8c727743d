"""The tree policy: which expansion to sample next. Pure functions of the tree state + a seeded RNG.

Per task and round: `expansions` steps of `group_size` siblings. Steps < `drafts` are drafts and
depend on nothing. Step s >= drafts waits until every group of steps < s of that task-round is
scored, then picks one parent among all of those nodes by a softmax over their rewards
(temperature `parent_temperature`), and asks for `debug` children of a buggy parent or `improve`
children of a valid one. The RNG is seeded by (run seed, task, round, step), so a restarted
sampler that rebuilt the same state from the log makes exactly the same choice. The run id is left
out on purpose, and candidates are ordered by position (step, index), not by node id (which hashes
the run id): two runs with one seed (a train arm and its no-train control) choose the same parents
while their trees agree, so their round 1 is the same tree.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field

from treegrpo import events
from treegrpo.advantages import masked
from treegrpo.config import RunSpec
from treegrpo.events import Status
from treegrpo.respend import no_variance


@dataclass(frozen=True)
class Score:
    reward: float
    status: str  # the final grader status (a Status)

    @property
    def buggy(self) -> bool:
        return self.status != Status.OK


@dataclass
class GroupState:
    """One expansion (sibling group) as the log tells it."""

    step: int
    group_id: str
    mode: str = ""
    parent_id: str | None = None
    sampled: dict[int, str] = field(default_factory=dict)  # index in group -> node id
    scores: dict[str, Score] | None = None  # set once group.scored arrived


@dataclass(frozen=True)
class Respend:
    """A `group.respent` decision as the tree needs it: the new group sits at `respend_step`."""

    step: int  # the zero-variance expansion
    respend_step: int
    siblings: int  # 0: nothing re-spent
    mode: str  # the new group's prompt: draft, improve or debug
    parent_id: str | None
    reserved_tokens: int


@dataclass
class RoundState:
    task: str
    round: int
    started_unix: int | None = None
    policy_version: int | None = None  # version serving at round.started
    groups: dict[int, GroupState] = field(default_factory=dict)  # step -> group (re-spent ones too)
    completed: bool = False
    respent: dict[int, Respend] = field(default_factory=dict)  # zero-variance step -> decision


@dataclass(frozen=True)
class Expansion:
    """What to sample: one sibling group, with the indices still missing."""

    task: str
    round: int
    step: int
    mode: str
    parent_id: str | None
    group_id: str
    missing: tuple[int, ...]
    group_size: int = 0  # siblings of the group; 0 = the tree's group_size (a re-spent group has its own)


def version_allows(round_: int, loaded_version: int, spec: RunSpec) -> bool:
    """Round r (1-based) is sampled only with version >= r - 1 - max_staleness; never wait without
    training."""
    return (not spec.train) or loaded_version >= round_ - 1 - spec.max_staleness


def softmax_choice(candidates: list[tuple[str, float]], temperature: float, rng: random.Random) -> str:
    """One id drawn with probability ∝ exp(reward / temperature) (stable: max subtracted)."""
    if not candidates:
        raise ValueError("no candidate parents")
    top = max(r for _, r in candidates)
    weights = [math.exp((r - top) / temperature) for _, r in candidates]
    return rng.choices([c for c, _ in candidates], weights=weights, k=1)[0]


def rng_for(spec: RunSpec, task: str, round_: int, step: int) -> random.Random:
    return random.Random(events.short_hash("policy", spec.seed, task, round_, step, n=16))


def positions(rs: RoundState) -> dict[str, tuple[int, int]]:
    """node id -> (step, index in group): where a node sits, the same in every run of one tree shape."""
    return {nid: (g.step, index) for g in rs.groups.values() for index, nid in g.sampled.items()}


def earlier_scored(rs: RoundState, step: int) -> dict[str, Score] | None:
    """All scores of steps < `step`, or None while any of those groups is unsampled or unscored."""
    out: dict[str, Score] = {}
    for s in range(step):
        g = rs.groups.get(s)
        if g is None or g.scores is None:
            return None
        out.update(g.scores)
    return out


def plan_step(run_id: str, spec: RunSpec, rs: RoundState, step: int) -> Expansion | None:
    """The expansion at `step` if its dependencies are met and some sibling is still unsampled."""
    g = spec.tree.group_size
    group = rs.groups.get(step)
    have = set(group.sampled) if group else set()
    missing = tuple(i for i in range(g) if i not in have)
    if not missing:
        return None
    gid = events.group_id(run_id, rs.task, rs.round, step)
    if step < spec.tree.drafts:
        return Expansion(rs.task, rs.round, step, "draft", None, gid, missing)
    if group is not None and group.mode:  # partly sampled before a restart: keep its parent and mode
        return Expansion(rs.task, rs.round, step, group.mode, group.parent_id, gid, missing)
    scores = earlier_scored(rs, step)
    if scores is None:
        return None
    # nodes our side failed to execute or grade have no outcome to debug or improve: never parents
    scores = {nid: sc for nid, sc in scores.items() if not masked(sc.status)}
    if not scores:  # every earlier node was masked: nothing to expand, so draft afresh
        return Expansion(rs.task, rs.round, step, "draft", None, gid, missing)
    # a fixed order that does not depend on the run id, so the draw depends only on the tree and seed
    where = positions(rs)
    ordered = sorted(scores.items(), key=lambda kv: (where.get(kv[0], (step, 0)), kv[0]))
    parent = softmax_choice(
        [(nid, sc.reward) for nid, sc in ordered],
        spec.tree.parent_temperature,
        rng_for(spec, rs.task, rs.round, step),
    )
    mode = "debug" if scores[parent].buggy else "improve"
    return Expansion(rs.task, rs.round, step, mode, parent, gid, missing)


def respend_expansions(run_id: str, rs: RoundState) -> list[Expansion]:
    """The re-spent groups of the round with siblings still unsampled (after a crash: the missing ones)."""
    out = []
    for d in rs.respent.values():
        group = rs.groups.get(d.respend_step)
        have = set(group.sampled) if group else set()
        missing = tuple(i for i in range(d.siblings) if i not in have)
        if missing:
            gid = events.group_id(run_id, rs.task, rs.round, d.respend_step)
            out.append(
                Expansion(rs.task, rs.round, d.respend_step, d.mode, d.parent_id, gid, missing, d.siblings)
            )
    return out


def respend_pending(rs: RoundState, spec: RunSpec) -> bool:
    """With re-spending on: a zero-variance expansion still waits for its decision, or a re-spent
    group for its scores (the round is not complete before both are settled)."""
    if not spec.tree.respend.enabled:
        return False
    for s in range(spec.tree.expansions):
        g = rs.groups.get(s)
        if g is None or g.scores is None or s in rs.respent:
            continue
        if no_variance([x.reward for x in g.scores.values()], [x.status for x in g.scores.values()]):
            return True
    return any(
        d.siblings and (rs.groups.get(d.respend_step) is None or rs.groups[d.respend_step].scores is None)
        for d in rs.respent.values()
    )


def round_complete(rs: RoundState, spec: RunSpec) -> bool:
    return all(
        rs.groups.get(s) is not None and rs.groups[s].scores is not None for s in range(spec.tree.expansions)
    ) and not respend_pending(rs, spec)


def next_expansions(
    run_id: str, spec: RunSpec, rounds: dict[tuple[str, int], RoundState], loaded_version: int, busy: set[str]
) -> list[Expansion]:
    """Every expansion that may start now, best first: earlier rounds, then deeper steps (finish trees)."""
    ready: list[tuple[tuple, Expansion]] = []
    for t_index, task in enumerate(spec.tasks):
        for r in range(1, spec.rounds + 1):
            rs = rounds.get((task, r)) or RoundState(task, r)
            if rs.completed:
                continue
            # every group, not only a round's first: a restarted sampler serves version 0 until its
            # catch-up pull lands, and a group sampled then would be stale to the learner
            if not version_allows(r, loaded_version, spec):
                break  # later rounds need an even newer version
            planned = [plan_step(run_id, spec, rs, step) for step in range(spec.tree.expansions)]
            for exp in [*planned, *respend_expansions(run_id, rs)]:
                if exp is not None and exp.group_id not in busy:
                    ready.append(((r, -exp.step, t_index), exp))
    return [e for _, e in sorted(ready, key=lambda x: x[0])]


def nothing_to_sample(spec: RunSpec, rounds: dict[tuple[str, int], RoundState], loaded_version: int) -> bool:
    """True when no round of the run can be sampled under `loaded_version`: every task has sampled all
    its rounds or its first open round is held back by the staleness rule (it needs the learner's next
    version). A sampler that shares its GPU releases it then: between rounds for the learner's step,
    and after the last round, whose step comes after all sampling (measured on the 27B: an engine
    kept awake there left the last step 6.5 GiB where it needs 25, and the run waited for good)."""
    for task in spec.tasks:
        first_open = next(
            (
                r
                for r in range(1, spec.rounds + 1)
                if not (rounds.get((task, r)) or RoundState(task, r)).completed
            ),
            None,
        )
        if first_open is not None and version_allows(first_open, loaded_version, spec):
            return False
    return True
