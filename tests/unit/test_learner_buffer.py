"""The learner's group buffer: which groups make the next step (no network, no model).

Imports a private module: `treegrpo_learner._buffer`, `treegrpo_learner._run_learner` (what these tests
exercise is not on the package's public surface).
"""

from __future__ import annotations

import asyncio

import pytest

from treegrpo_learner._buffer import GroupBuffer, Member, PendingGroup

pytestmark = pytest.mark.timeout(30)


def group(name: str, round_: int, seq: int, version: int) -> PendingGroup:
    members = [Member(f"{name}-{i}", float(i), "ok", (1,), (2,), (-0.1,), version) for i in range(2)]
    return PendingGroup(name, "t", round_, 0, seq, members, asyncio.get_running_loop().create_future())


async def test_sync_waits_for_the_whole_oldest_round_and_takes_only_it():
    buf = GroupBuffer()
    for i, (r, v) in enumerate([(1, 0), (2, 1), (1, 0)]):
        buf.add(group(f"g{i}", r, i, v))
    assert buf.take(3, 0, 0, sync=True) is None  # round 1 has two of three groups
    buf.add(group("g3", 1, 3, 0))
    batch = buf.take(3, 0, 0, sync=True)
    assert [g.group for g in batch.groups] == ["g0", "g2", "g3"] and not batch.stale


async def test_stale_groups_are_dropped_and_the_rest_of_their_round_still_makes_a_step():
    """A group sampled with an old version is dropped; the round's others must not wait for it forever."""
    buf = GroupBuffer()
    buf.add(group("old", 2, 0, 0))
    buf.add(group("a", 2, 1, 1))
    buf.add(group("b", 2, 2, 1))
    first = buf.take(3, 1, 0, sync=True)
    assert [g.group for g in first.stale] == ["old"] and first.groups == []
    dropped = {g.group for g in first.stale}
    batch = buf.take(3, 1, 0, sync=True, consumed=lambda r: len(dropped) if r == 2 else 0)
    assert [g.group for g in batch.groups] == ["a", "b"]


async def test_async_takes_the_oldest_groups_in_stream_order():
    buf = GroupBuffer()
    for i in (5, 1, 3):
        buf.add(group(f"g{i}", 1 + i % 2, i, 2))
    batch = buf.take(2, 3, 1, sync=False)
    assert [g.group for g in batch.groups] == ["g1", "g3"] and len(buf) == 1


async def test_masked_members_train_nothing_and_a_dropped_group_still_completes_its_round():
    """Siblings our side failed to execute or grade are no samples; a group with fewer than two
    siblings left is dropped, yet rides in its round's batch (counted, acked after the step)."""
    from opentelemetry import trace

    from treegrpo.config import RunSpec
    from treegrpo_learner._buffer import Batch
    from treegrpo_learner._run_learner import RunLearner
    from treegrpo_learner.config import LearnerConfig

    def member(name: str, reward: float, status: str) -> Member:
        return Member(name, reward, status, (1, 2), (3, 4), (-0.1, -0.2), 0)

    loop = asyncio.get_running_loop()
    kept = PendingGroup(
        "kept",
        "t",
        1,
        0,
        1,
        [member("a", 0.7, "ok"), member("b", 0.0, "infrastructure"), member("c", 0.2, "ok")],
        loop.create_future(),
    )
    lost = PendingGroup(
        "lost",
        "t",
        1,
        1,
        2,
        [member("d", 0.9, "ok"), member("e", 0.0, "infrastructure"), member("f", 0.0, "infrastructure")],
        loop.create_future(),
    )
    assert kept.dropped == "" and "1 left" in lost.dropped
    buf = GroupBuffer()
    buf.add(kept)
    buf.add(lost)
    batch = buf.take(2, 0, 0, sync=True)
    assert [g.group for g in batch.groups] == ["kept", "lost"]  # the round is whole with the dropped one
    spec = RunSpec(run_id="r", tasks=["t"], rounds=1)
    learner = RunLearner(
        LearnerConfig(estimator="grpo"), "r", spec, None, "learner/test", trace.get_tracer("t")
    )
    got = learner.samples(Batch(batch.groups))
    samples, with_signal = got.samples, got.with_signal
    assert [s.node_id for s in samples] == ["a", "c"] and with_signal == 1
    assert samples[0].advantage > 0 > samples[1].advantage
