"""The tree policy: pure function of the tree state + a seeded RNG (no network).

Imports a private module: `treegrpo_sampler._expand` (what these tests exercise is not on the package's
public surface).
"""

from __future__ import annotations

import random
from collections import Counter

from treegrpo import events
from treegrpo.config import RunSpec
from treegrpo_sampler.policy import (
    GroupState,
    RoundState,
    Score,
    next_expansions,
    plan_step,
    round_complete,
    softmax_choice,
    version_allows,
)

RUN = "r1"


def spec(**kw) -> RunSpec:
    return RunSpec(run_id=RUN, tasks=kw.pop("tasks", ["spooky-mini"]), rounds=kw.pop("rounds", 3), **kw)


def sample_all(rs: RoundState, step: int, g: int, mode="draft", parent=None) -> GroupState:
    group = GroupState(step, events.group_id(RUN, rs.task, rs.round, step), mode, parent)
    group.sampled = {i: events.node_id(RUN, rs.task, rs.round, step, i) for i in range(g)}
    rs.groups[step] = group
    return group


def score(group: GroupState, reward_of) -> None:
    group.scores = {nid: Score(*reward_of(i)) for i, nid in group.sampled.items()}


def test_seed_round_anatomy_two_draft_groups_of_sixteen_then_parent_choice():
    s = spec()
    rs = RoundState("spooky-mini", 1)
    first = next_expansions(RUN, s, {("spooky-mini", 1): rs}, 0, set())
    assert [(e.step, e.mode, len(e.missing)) for e in first] == [(1, "draft", 16), (0, "draft", 16)]
    assert all(e.parent_id is None for e in first)
    g0, g1 = sample_all(rs, 0, 16), sample_all(rs, 1, 16)
    assert next_expansions(RUN, s, {("spooky-mini", 1): rs}, 0, set()) == []  # step 2 waits for grades
    score(g0, lambda i: (-0.5, "crashed"))
    assert plan_step(RUN, s, rs, 2) is None  # ... for every earlier group
    score(g1, lambda i: (0.9, "ok") if i == 3 else (-0.5, "crashed"))
    exp = plan_step(RUN, s, rs, 2)
    assert exp is not None and exp.missing == tuple(range(16))
    assert exp.mode == ("improve" if exp.parent_id == g1.sampled[3] else "debug")
    assert plan_step(RUN, s, rs, 3) is None  # step 3 waits for step 2


def test_parent_choice_is_deterministic_for_the_same_state_and_seed():
    s = spec()
    choices = set()
    for _ in range(3):
        rs = RoundState("spooky-mini", 1)
        score(sample_all(rs, 0, 16), lambda i: (i / 16, "ok"))
        score(sample_all(rs, 1, 16), lambda i: (-0.5, "crashed"))
        choices.add(plan_step(RUN, s, rs, 2).parent_id)
    assert len(choices) == 1
    other = spec(seed=7)
    rs = RoundState("spooky-mini", 1)
    score(sample_all(rs, 0, 16), lambda i: (i / 16, "ok"))
    score(sample_all(rs, 1, 16), lambda i: (-0.5, "crashed"))
    assert plan_step(RUN, other, rs, 2).group_id == events.group_id(RUN, "spooky-mini", 1, 2)


def test_debug_child_of_a_buggy_parent_and_improve_child_of_a_valid_one():
    s = spec()
    for status, mode in (("crashed", "debug"), ("ok", "improve")):
        rs = RoundState("spooky-mini", 1)
        score(sample_all(rs, 0, 4), lambda i, st=status: (0.1, st))
        score(sample_all(rs, 1, 4), lambda i, st=status: (0.1, st))
        assert plan_step(RUN, s, rs, 2).mode == mode


def test_softmax_prefers_higher_rewards_and_temperature_flattens():
    cands = [("low", -0.5), ("mid", 0.2), ("high", 0.9)]
    cold = Counter(softmax_choice(cands, 0.1, random.Random(i)) for i in range(2000))
    warm = Counter(softmax_choice(cands, 100.0, random.Random(i)) for i in range(2000))
    assert cold["high"] > 1900
    assert all(550 < warm[c] < 780 for c, _ in cands)


def test_half_sampled_group_resumes_with_only_its_missing_siblings_and_its_parent():
    s = spec()
    rs = RoundState("spooky-mini", 1)
    g = sample_all(rs, 2, 16, mode="debug", parent="abc")
    for i in (3, 4, 15):
        del g.sampled[i]
    exp = plan_step(RUN, s, rs, 2)
    assert exp.missing == (3, 4, 15) and exp.mode == "debug" and exp.parent_id == "abc"


def test_sync_round_waits_for_the_policy_trained_on_the_previous_round():
    s = spec(max_staleness=0)
    assert version_allows(1, 0, s) and not version_allows(2, 0, s) and version_allows(2, 1, s)
    k2 = spec(max_staleness=2)
    assert version_allows(3, 0, k2) and not version_allows(4, 0, k2)
    assert version_allows(9, 0, spec(train=False))


def test_next_expansions_interleave_tasks_and_only_open_rounds_the_version_allows():
    s = spec(tasks=["a", "b"], rounds=3, max_staleness=1)
    todo = next_expansions(RUN, s, {}, 0, set())
    assert {(e.task, e.round, e.step) for e in todo} == {
        (t, r, st) for t in "ab" for r in (1, 2) for st in (0, 1)
    }
    assert [e.round for e in todo] == sorted(e.round for e in todo)  # earlier rounds first
    busy = {todo[0].group_id}
    assert todo[0].group_id not in {e.group_id for e in next_expansions(RUN, s, {}, 0, busy)}


def test_a_started_round_is_not_continued_by_a_sampler_that_has_not_caught_up_on_weights():
    """A restarted sampler serves v0 until its pull of v1 lands; round 2 (started before) must wait."""
    s = spec(rounds=3, max_staleness=0)
    s.tree.expansions = 3
    r1 = RoundState("spooky-mini", 1, started_unix=1, completed=True)
    r2 = RoundState("spooky-mini", 2, started_unix=2, policy_version=1)
    rounds = {("spooky-mini", 1): r1, ("spooky-mini", 2): r2}
    assert next_expansions(RUN, s, rounds, 0, set()) == []
    assert {e.round for e in next_expansions(RUN, s, rounds, 1, set())} == {2}


def test_round_is_complete_only_when_every_expansion_is_scored():
    s = spec()
    s.tree.expansions = 2
    rs = RoundState("a", 1)
    score(sample_all(rs, 0, 2), lambda i: (0.0, "ok"))
    sample_all(rs, 1, 2)
    assert not round_complete(rs, s)
    score(rs.groups[1], lambda i: (0.0, "ok"))
    assert round_complete(rs, s)


def _tree_of(run_id: str, s: RunSpec) -> tuple[RoundState, dict[str, tuple[int, int]]]:
    rs = RoundState("spooky-mini", 1)
    where = {}
    for step in (0, 1):
        group = GroupState(step, events.group_id(run_id, rs.task, rs.round, step), "draft")
        group.sampled = {i: events.node_id(run_id, rs.task, rs.round, step, i) for i in range(16)}
        group.scores = {nid: Score(0.1 * (i % 4), "ok") for i, nid in group.sampled.items()}
        where |= {nid: (step, i) for i, nid in group.sampled.items()}
        rs.groups[step] = group
    return rs, where


def test_two_runs_with_one_seed_choose_the_same_parent_position_whatever_their_run_ids():
    """A train arm and its control differ only in run id: their round-1 trees must stay the same tree."""
    s = spec(seed=7)
    picked = set()
    for run_id in ("train-a", "train-a-control", "zz-other"):
        rs, where = _tree_of(run_id, s)
        picked |= {tuple(where[plan_step(run_id, s, rs, step).parent_id]) for step in (2,)}
    assert len(picked) == 1


def test_sampling_seed_ignores_the_run_id_but_not_the_position_or_seed():
    from treegrpo_sampler._expand import sampling_seed

    class _State:
        def __init__(self, seed: int):
            self.spec = spec(seed=seed)

    def exp(run_id: str, step: int):
        from treegrpo_sampler.policy import Expansion

        return Expansion(
            "spooky-mini", 1, step, "draft", None, events.group_id(run_id, "spooky-mini", 1, step), (0, 1)
        )

    assert sampling_seed(_State(0), exp("a", 0)) == sampling_seed(_State(0), exp("a-control", 0))
    assert sampling_seed(_State(0), exp("a", 0)) != sampling_seed(_State(0), exp("a", 1))
    assert sampling_seed(_State(0), exp("a", 0)) != sampling_seed(_State(1), exp("a", 0))


def test_a_node_masked_by_an_infrastructure_fault_is_never_chosen_as_a_parent():
    s = spec()
    s.tree.group_size, s.tree.expansions = 2, 3
    for seed in range(40):
        s.seed = seed
        rs = RoundState("spooky-mini", 1)
        for step in (0, 1):
            # the masked node has the top reward: a softmax would favour it if it were a candidate
            score(sample_all(rs, step, 2), lambda i: (5.0, "infrastructure") if i == 0 else (0.1, "crashed"))
        exp = plan_step(RUN, s, rs, 2)
        assert exp.parent_id not in {rs.groups[0].sampled[0], rs.groups[1].sampled[0]}
        assert exp.mode == "debug"


def test_when_every_earlier_node_was_masked_the_expansion_drafts_afresh():
    s = spec()
    s.tree.group_size, s.tree.expansions = 2, 3
    rs = RoundState("spooky-mini", 1)
    for step in (0, 1):
        score(sample_all(rs, step, 2), lambda i: (0.0, "infrastructure"))
    exp = plan_step(RUN, s, rs, 2)
    assert (exp.mode, exp.parent_id, exp.missing) == ("draft", None, (0, 1))


def test_a_run_has_nothing_to_sample_when_every_task_waits_for_a_newer_version_or_is_sampled_out():
    from treegrpo.config import RunSpec
    from treegrpo_sampler.policy import RoundState, nothing_to_sample

    spec = RunSpec(tasks=["a", "b"], rounds=3, train=True, max_staleness=0)
    done = {(t, 1): RoundState(t, 1, completed=True) for t in ("a", "b")}
    assert nothing_to_sample(spec, done, loaded_version=0)  # round 2 of both needs v1
    assert not nothing_to_sample(spec, done, loaded_version=1)
    half = {("a", 1): RoundState("a", 1, completed=True)}
    assert not nothing_to_sample(spec, half, loaded_version=0)  # task b's round 1 can still be sampled
    assert not nothing_to_sample(spec.model_copy(update={"train": False}), done, loaded_version=0)
    # every round sampled: the last step is the learner's, the engine has nothing to do until then
    every = {(t, r): RoundState(t, r, completed=True) for t in ("a", "b") for r in (1, 2, 3)}
    assert nothing_to_sample(spec, every, loaded_version=2)
    last = {**every, ("b", 3): RoundState("b", 3)}
    assert nothing_to_sample(spec, last, loaded_version=1) and not nothing_to_sample(
        spec, last, loaded_version=2
    )
