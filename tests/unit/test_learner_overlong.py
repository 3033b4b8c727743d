"""Responses cut at max_new_tokens: recorded on their node, masked from the loss or penalised (DAPO).

Imports a private module: `treegrpo_learner._buffer`, `treegrpo_learner._run_learner`,
`treegrpo_sampler._expand`, `treegrpo_sampler._state` (what these tests exercise is not on the package's
public surface).
"""

from __future__ import annotations

import asyncio

import pytest
from opentelemetry import trace

from treegrpo.config import RunSpec
from treegrpo.v1 import events_pb2 as pb
from treegrpo_learner._buffer import Batch, Member, PendingGroup
from treegrpo_learner._run_learner import RunLearner
from treegrpo_learner.config import LearnerConfig, OverlongSettings
from treegrpo_sampler import _expand
from treegrpo_sampler._state import RunState
from treegrpo_sampler.backends import Completion
from treegrpo_sampler.policy import Expansion

pytestmark = pytest.mark.timeout(30)


def _member(name: str, reward: float, length: int, truncated: bool = False) -> Member:
    return Member(name, reward, "ok", (1, 2), tuple(range(length)), (-0.1,) * length, 0, truncated)


def _learner(**overlong) -> RunLearner:
    cfg = LearnerConfig(estimator="grpo", overlong=overlong)
    spec = RunSpec(run_id="r", tasks=["t"], rounds=1)
    return RunLearner(cfg, "r", spec, None, "learner/test", trace.get_tracer("t"))


def _group(members: list[Member]) -> PendingGroup:
    return PendingGroup("g", "t", 1, 0, 1, members, asyncio.get_running_loop().create_future())


def test_soft_overlong_penalty_ramps_from_zero_to_minus_factor():
    s = OverlongSettings(mode="penalty", max_tokens=100, buffer_tokens=20, factor=0.5)
    assert [s.penalty(n) for n in (10, 80, 90, 100, 120)] == pytest.approx([0, 0, -0.25, -0.5, -0.5])
    with pytest.raises(ValueError):
        OverlongSettings(mode="penalty", max_tokens=100)  # no ramp: nothing to punish softly


async def test_masked_overlong_responses_leave_the_loss_but_keep_their_place_in_the_group():
    learner = _learner(mode="mask")
    g = _group([_member("a", 1.0, 3), _member("b", 0.0, 4, truncated=True), _member("c", 0.5, 3)])
    got = learner.samples(Batch([g]))
    samples, with_signal = got.samples, got.with_signal
    assert [s.node_id for s in samples] == ["a", "c"] and with_signal == 1
    # b's reward still sets the baseline: a above the mean, c at it
    assert samples[0].advantage > 0 and samples[1].advantage == pytest.approx(0.0, abs=1e-9)
    assert got.counts == {"sequences_overlong": 1.0, "sequences_overlong_masked": 1.0}


async def test_kept_overlong_responses_train_and_are_counted():
    learner = _learner()
    g = _group([_member("a", 1.0, 3), _member("b", 0.0, 4, truncated=True)])
    got = learner.samples(Batch([g]))
    assert [s.node_id for s in got.samples] == ["a", "b"]
    assert got.counts == {"sequences_overlong": 1.0}


async def test_length_penalty_turns_an_equal_group_into_a_signal_against_the_long_one():
    learner = _learner(mode="penalty", max_tokens=10, buffer_tokens=4)
    g = _group([_member("short", 0.5, 3), _member("long", 0.5, 10, truncated=True)])
    got = learner.samples(Batch([g]))
    samples, with_signal = got.samples, got.with_signal
    assert with_signal == 1
    assert samples[0].advantage > 0 > samples[1].advantage


def test_node_sampled_records_a_completion_cut_at_max_new_tokens():
    spec = RunSpec(run_id="r", tasks=["t"], rounds=1)
    state = RunState("r", spec)
    exp = Expansion("t", 1, 0, "draft", None, "gid", (0, 1))
    comps = [
        Completion("```python\nprint(1)\n```", [1, 2], [-0.1, -0.2], [9], "stop"),
        Completion("```python\nprint(", [1, 2, 3], [-0.1, -0.2, -0.3], [9], "length"),
    ]
    evs = _expand.node_events(state, exp, [], _expand.Sampled(comps, 0, 1.0), "sampler/t", "s0", "m")
    nodes = [e.node_sampled for e in evs if e.HasField("node_sampled")]
    assert [n.finish_reason for n in nodes] == ["stop", "length"]
    assert isinstance(nodes[0], pb.NodeSampled)
