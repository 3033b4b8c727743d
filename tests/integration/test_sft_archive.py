"""`--from-archive` against a real nats-server: a generated run's log, the selection rule, the pairs.

Imports a private module: `treegrpo_learner.sft._run` (what these tests exercise is not on the package's
public surface).
"""

from __future__ import annotations

import pytest

from treegrpo import events
from treegrpo.v1 import events_pb2 as pb
from treegrpo_learner.sft import ArchiveSettings, SftConfig, archive_pairs
from treegrpo_learner.sft._run import build_pairs

pytestmark = pytest.mark.timeout(60)
RUN = "sftrun1"

# (task, step) -> per sibling: (status, reward, oriented). Designed so the right picks are known:
# a non-ok sibling carries the highest reward (never pickable), an all-failed group yields nothing,
# equal rewards break on the oriented metric.
GROUPS = {
    ("spooky-mini", 0): [("ok", 0.2, -0.9), ("ok", 0.9, -0.5), ("crashed", -0.5, None), ("ok", 0.5, -0.7)],
    ("spooky-mini", 1): [
        ("crashed", -0.5, None),
        ("timeout", -0.5, None),
        ("no_code", -0.5, None),
        ("crashed", -0.5, None),
    ],
    ("spooky-mini", 2): [
        ("invalid_submission", 1.0, None),
        ("ok", 0.4, -0.8),
        ("ok", 0.6, -0.6),
        ("ok", 0.1, -1.0),
    ],
    ("cactus-mini", 0): [("ok", 0.7, 0.90), ("ok", 0.7, 0.95), ("ok", 0.3, 0.60), ("crashed", -0.5, None)],
    ("cactus-mini", 1): [
        ("ok", 0.8, 0.97),
        ("no_submission", -0.2, None),
        ("ok", 0.2, 0.55),
        ("ok", 0.65, 0.93),
    ],
}
# By hand: best valid of each group; top-2 of each task over all its valid siblings.
BEST = {("spooky-mini", 0, 1), ("spooky-mini", 2, 2), ("cactus-mini", 0, 1), ("cactus-mini", 1, 0)}
TOP2 = {("spooky-mini", 0, 1), ("spooky-mini", 2, 2), ("cactus-mini", 1, 0), ("cactus-mini", 0, 1)}
TOP3_SPOOKY_EXTRA = ("spooky-mini", 0, 3)  # reward 0.5: third in spooky
TOP3_CACTUS_EXTRA = (
    "cactus-mini",
    0,
    0,
)  # reward 0.7, oriented 0.90: third in cactus (0.8, 0.7/0.95, 0.7/0.90)


def nid(task: str, step: int, i: int) -> str:
    return events.node_id(RUN, task, 1, step, i)


def run_events() -> list[pb.Event]:
    out = []
    for (task, step), members in GROUPS.items():
        group = events.group_id(RUN, task, 1, step)
        scored = pb.GroupScored(sibling_group=group, task=task, round=1, step=step)
        for i, (status, reward, oriented) in enumerate(members):
            prompt = [
                pb.ChatMessage(role="system", content="sys"),
                pb.ChatMessage(role="user", content=f"prompt of {task} step {step}"),
            ]
            out.append(
                events.make_event(
                    RUN,
                    "sampler",
                    pb.NodeSampled(
                        node_id=nid(task, step, i),
                        task=task,
                        round=1,
                        step=step,
                        sibling_group=group,
                        mode="draft" if step < 2 else "improve",
                        group_size=len(members),
                        index_in_group=i,
                        prompt_messages=prompt,
                        raw_completion=f"plan {i}\n\n```python\nprint({i})\n```",
                    ),
                )
            )
            m = scored.members.add(node_id=nid(task, step, i), reward=reward, status=status)
            if oriented is not None:
                m.oriented = oriented
        out.append(events.make_event(RUN, "grader", scored))
    return out


def picked(pairs) -> set[tuple[str, int, int]]:
    index = {nid(t, s, i): (t, s, i) for (t, s), ms in GROUPS.items() for i in range(len(ms))}
    return {index[p.source.split("/")[-1]] for p in pairs}


async def test_best_per_group_picks_the_best_valid_sibling_of_each_group_with_its_exact_prompt(bus):
    await bus.publish_many(run_events())
    pairs, missing = await archive_pairs(bus, ArchiveSettings(runs=[RUN], select="best-per-group"))
    assert missing == []
    assert picked(pairs) == BEST and len(pairs) == len(BEST)
    one = next(p for p in pairs if p.source.endswith(nid("spooky-mini", 2, 2)))
    assert one.messages == [
        {"role": "system", "content": "sys"},
        {"role": "user", "content": "prompt of spooky-mini step 2"},
    ]
    assert one.completion == "plan 2\n\n```python\nprint(2)\n```" and one.mode == "improve"


async def test_top_k_picks_the_k_highest_reward_valid_nodes_per_task(bus):
    await bus.publish_many(run_events())
    pairs, _ = await archive_pairs(bus, ArchiveSettings(runs=[RUN], select="top-k", top_k=2))
    assert picked(pairs) == TOP2
    pairs, _ = await archive_pairs(bus, ArchiveSettings(runs=[RUN], select="top-k", top_k=3))
    assert picked(pairs) == TOP2 | {TOP3_SPOOKY_EXTRA, TOP3_CACTUS_EXTRA}


async def test_min_reward_drops_picks_below_it_and_a_missing_sampled_fact_is_reported(bus):
    events = run_events()
    skip = nid("cactus-mini", 1, 0)
    await bus.publish_many(
        [e for e in events if not (e.HasField("node_sampled") and e.node_sampled.node_id == skip)]
    )
    pairs, missing = await archive_pairs(bus, ArchiveSettings(runs=[RUN], min_reward=0.65))
    assert picked(pairs) == {("spooky-mini", 0, 1), ("cactus-mini", 0, 1)}
    assert missing == [f"{RUN}/{skip}"]


async def test_sft_config_from_archive_reaches_the_server_named_in_its_nats_settings(bus, nats_server):
    await bus.publish_many(run_events())
    cfg = SftConfig(archive={"runs": [RUN]}, nats={"url": nats_server.url})
    pairs = await build_pairs(cfg, use_corpus=False)
    assert picked(pairs) == BEST
