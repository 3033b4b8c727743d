"""Rejection-sampling fine-tuning pairs from runs' event logs (`--from-archive RUN...`).

The log holds everything needed: `group.scored` names each sibling group's members with their
final status and reward, `node.sampled` holds each node's exact prompt messages and raw
completion. The selection rule is a pure function of the scored groups (`select_nodes`), so
what it picks can be stated and tested apart from the bus.

Rules (only valid nodes, status `ok`, are ever picked):
- best-per-group: in each sibling group, the member with the highest reward;
- top-k: in each task of a run, the k members with the highest reward.
Ties break on the higher oriented metric, then the smaller node id, so a selection is
deterministic. `min_reward` drops picks below it.
"""

from __future__ import annotations

from dataclasses import dataclass

from treegrpo import events
from treegrpo.bus import Bus
from treegrpo.events import Kind, Status
from treegrpo_learner.sft._pairs import Pair, make_pair
from treegrpo_learner.sft.config import ArchiveSettings

READ_BATCH = 64  # picked nodes whose node.sampled and tokens.recorded are read in one request


@dataclass(frozen=True)
class Member:
    node_id: str
    reward: float
    status: str
    oriented: float | None


@dataclass(frozen=True)
class ScoredGroup:
    run_id: str
    sibling_group: str
    task: str
    round: int
    step: int
    members: tuple[Member, ...]


def _rank(m: Member) -> tuple:
    return (-m.reward, -(m.oriented if m.oriented is not None else float("-inf")), m.node_id)


def select_nodes(
    groups: list[ScoredGroup], select: str, top_k: int = 16, min_reward: float | None = None
) -> list[tuple[str, str]]:
    """(run_id, node_id) of every picked node, in a deterministic order."""
    picked: list[tuple[str, Member]] = []
    if select == "best-per-group":
        for g in sorted(groups, key=lambda g: (g.run_id, g.task, g.round, g.step, g.sibling_group)):
            valid = sorted((m for m in g.members if m.status == Status.OK), key=_rank)
            if valid:
                picked.append((g.run_id, valid[0]))
    elif select == "top-k":
        pools: dict[tuple[str, str], list[Member]] = {}
        for g in groups:
            pools.setdefault((g.run_id, g.task), []).extend(m for m in g.members if m.status == Status.OK)
        for key in sorted(pools):
            picked += [(key[0], m) for m in sorted(pools[key], key=_rank)[:top_k]]
    else:
        raise ValueError(f"unknown selection rule {select!r}")
    return [(run, m.node_id) for run, m in picked if min_reward is None or m.reward >= min_reward]


async def read_groups(bus: Bus, run_id: str) -> list[ScoredGroup]:
    out: list[ScoredGroup] = []
    async for _, event in bus.replay(run_id, kinds=[Kind.GROUP_SCORED]):
        g = event.group_scored
        members = tuple(
            Member(m.node_id, m.reward, m.status, m.oriented if m.HasField("oriented") else None)
            for m in g.members
        )
        out.append(ScoredGroup(run_id, g.sibling_group, g.task, g.round, g.step, members))
    return out


async def archive_pairs(bus: Bus, settings: ArchiveSettings) -> tuple[list[Pair], list[str]]:
    """The pairs of the picked nodes and the (run/node) ids picked whose node.sampled (or the
    tokens.recorded it names) is missing."""
    pairs: list[Pair] = []
    missing: list[str] = []
    for run_id in settings.runs:
        groups = await read_groups(bus, run_id)
        picked = select_nodes(groups, settings.select, settings.top_k, settings.min_reward)
        for i in range(0, len(picked), READ_BATCH):  # one request a batch; the big bodies not all held
            batch = picked[i : i + READ_BATCH]
            nodes = [node for _run, node in batch]
            wanted = [(Kind.NODE_SAMPLED, n) for n in nodes] + [(Kind.TOKENS_RECORDED, n) for n in nodes]
            found = await bus.last_facts(run_id, wanted)
            for run, node in batch:  # the run's groups: `run` is `run_id`
                ev, rec = found.get((Kind.NODE_SAMPLED, node)), found.get((Kind.TOKENS_RECORDED, node))
                s = ev.node_sampled if ev is not None else None
                tokens = events.tokens_of(s, rec.tokens_recorded if rec else None) if s is not None else None
                if tokens is None:
                    missing.append(f"{run}/{node}")
                    continue
                msgs = [{"role": m.role, "content": m.content} for m in tokens.prompt_messages]
                pairs.append(make_pair(msgs, s.raw_completion, s.task, s.mode, f"archive:{run}/{node}"))
    return pairs, missing
