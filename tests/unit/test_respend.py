"""Zero-variance groups re-spent by the search: the plan, the sampler's decisions and new groups,
the learner's sync rule and skip (no network, no model).

Imports a private module: `treegrpo_learner._buffer`, `treegrpo_learner._respend`,
`treegrpo_learner._run_learner`, `treegrpo_sampler._respend`, `treegrpo_sampler._state` (what these
tests exercise is not on the package's public surface).
"""

from __future__ import annotations

import asyncio
import random

import pytest
from opentelemetry import trace

from treegrpo import events
from treegrpo.config import RespendSettings, RunSpec
from treegrpo.respend import ALL_EQUAL, ALL_FAILED, TOO_FEW, Scored, no_variance, plan_round
from treegrpo.v1 import events_pb2 as pb
from treegrpo_learner._buffer import Batch, GroupBuffer, Member, PendingGroup
from treegrpo_learner._respend import SKIPPED
from treegrpo_learner._run_learner import RunLearner
from treegrpo_learner.config import LearnerConfig
from treegrpo_sampler import _respend
from treegrpo_sampler._state import RunState
from treegrpo_sampler.policy import Score, next_expansions, round_complete

pytestmark = pytest.mark.timeout(30)

RUN, TASK = "r1", "spooky-mini"
CRASHED = (-0.5, "crashed")


def spec(**respend) -> RunSpec:
    tree = {"expansions": 3, "group_size": 4, "drafts": 1, "respend": {"enabled": True, **respend}}
    return RunSpec(run_id=RUN, tasks=[TASK], rounds=1, tree=tree)


def scored_round(state: RunState, outcomes) -> None:
    """Every expansion of round 1 sampled and scored; outcomes(step, index) -> (reward, status)."""
    t = state.spec.tree
    for step in range(t.expansions):
        g = state.group(TASK, 1, step)
        g.mode = "draft" if step < t.drafts else "improve"
        g.parent_id = None if step < t.drafts else events.node_id(RUN, TASK, 1, 0, 0)
        g.sampled = {i: events.node_id(RUN, TASK, 1, step, i) for i in range(t.group_size)}
        g.scores = {nid: Score(*outcomes(step, i)) for i, nid in g.sampled.items()}


def crashed_first(step: int, index: int) -> tuple[float, str]:
    """Step 0 all crashed; the others mixed (every other sibling valid, with distinct scores)."""
    if step == 0 or index % 2:
        return CRASHED
    return 0.2 + 0.1 * index + 0.01 * step, "ok"


def test_no_variance_names_all_failed_all_equal_and_too_few():
    assert no_variance([-0.5] * 4, ["crashed", "timeout", "no_code", "crashed"]) == ALL_FAILED
    assert no_variance([0.5] * 3, ["ok"] * 3) == ALL_EQUAL
    assert no_variance([0.0, 0.0, 0.3], ["infrastructure", "infrastructure", "ok"]) == TOO_FEW
    assert no_variance([0.4, 0.6], ["ok", "ok"]) == ""
    assert no_variance([-0.5, 0.5, 0.0], ["crashed", "ok", "infrastructure"]) == ""


def test_an_all_crashed_group_gets_extra_siblings_within_the_budget():
    groups = [Scored(0, (-0.5,) * 4, ("crashed",) * 4), Scored(1, (0.3, 0.7), ("ok", "ok"))]
    [grant] = plan_round(
        RespendSettings(enabled=True, max_extra_siblings=8, round_token_budget=1000), groups, 100
    )
    assert (grant.step, grant.why, grant.siblings, grant.reserved_tokens, grant.budget_left) == (
        0,
        ALL_FAILED,
        8,
        800,
        200,
    )
    [short] = plan_round(
        RespendSettings(enabled=True, max_extra_siblings=8, round_token_budget=350), groups, 100
    )
    assert (short.siblings, short.reserved_tokens, short.budget_left) == (3, 300, 50)


def test_groups_are_granted_in_step_order_until_the_budget_is_spent():
    groups = [Scored(s, (-0.5,) * 4, ("crashed",) * 4) for s in (2, 0, 1)]  # arrival order is no matter
    grants = plan_round(
        RespendSettings(enabled=True, max_extra_siblings=4, round_token_budget=500), groups, 100
    )
    assert [(g.step, g.siblings) for g in grants] == [(0, 4), (1, 0), (2, 0)]
    assert "nothing re-spent" in grants[1].reason and grants[1].budget_left == 100


def test_the_budget_is_never_exceeded_whatever_the_settings_and_scores():
    rng = random.Random(0)
    for _ in range(300):
        settings = RespendSettings(
            enabled=True,
            max_extra_siblings=rng.randint(0, 16),
            min_extra_siblings=rng.randint(2, 4),
            round_token_budget=rng.randint(0, 5000),
        )
        tps = rng.randint(1, 900)
        groups = [
            Scored(s, tuple(rng.choice([-0.5, 0.5]) for _ in range(3)), ("ok", "crashed", "ok"))
            for s in range(rng.randint(1, 6))
        ]
        recorded = {0: tps * 2} if rng.random() < 0.3 and tps * 2 <= settings.round_token_budget else {}
        grants = plan_round(settings, groups, tps, recorded)
        spent = sum(g.reserved_tokens for g in grants) + sum(recorded.values())
        assert spent <= settings.round_token_budget
        assert all(
            g.siblings == 0 or settings.min_extra_siblings <= g.siblings <= settings.max_extra_siblings
            for g in grants
        )
        assert all(g.reserved_tokens == g.siblings * tps for g in grants)


def test_a_re_plan_keeps_what_the_log_decided_and_spends_its_reservation_once():
    settings = RespendSettings(enabled=True, max_extra_siblings=4, round_token_budget=600)
    groups = [Scored(s, (-0.5,) * 4, ("crashed",) * 4) for s in range(2)]
    first = plan_round(settings, groups, 100)
    assert [(g.step, g.siblings) for g in first] == [(0, 4), (1, 2)]
    again = plan_round(settings, groups, 100, recorded={0: 400})  # step 0's decision is on the log
    assert [(g.step, g.siblings, g.budget_left) for g in again] == [(1, 2, 0)]
    assert plan_round(settings, groups, 100, recorded={0: 400, 1: 200}) == []


def test_the_sampler_decides_once_the_round_is_scored_and_samples_the_new_group():
    state = RunState(RUN, spec(max_extra_siblings=3, round_token_budget=40))
    scored_round(state, crashed_first)
    rs = state.round(TASK, 1)
    assert not round_complete(rs, state.spec)  # step 0 has no variance and no decision yet
    [ev] = _respend.decisions(state, rs, tokens_per_sibling=12, producer="sampler/test")
    d = ev.group_respent
    assert ev.envelope.event_id == events.event_id(
        RUN, events.Kind.GROUP_RESPENT, events.group_id(RUN, TASK, 1, 0)
    )
    assert (d.step, d.why, d.mode, d.extra_siblings, d.respend_step, d.reserved_tokens, d.budget_left) == (
        0,
        ALL_FAILED,
        "grow",
        3,
        3,
        36,
        4,
    )
    assert d.respend_group == events.group_id(RUN, TASK, 1, 3) and d.child_mode == "draft"
    assert not d.HasField("parent_id")  # grown from a draft: a draft again
    state.apply(ev)
    state.apply(ev)  # a redelivery folds to the same state
    assert _respend.decisions(state, rs, 12, "sampler/test") == []  # decided: nothing more to publish
    [exp] = next_expansions(RUN, state.spec, state.rounds, 0, set())
    assert (exp.step, exp.mode, exp.parent_id, exp.missing, exp.group_size) == (
        3,
        "draft",
        None,
        (0, 1, 2),
        3,
    )
    assert not round_complete(rs, state.spec)  # the re-spent group is not scored yet
    new = state.group(TASK, 1, 3)
    new.sampled = {0: events.node_id(RUN, TASK, 1, 3, 0)}  # one sibling landed before a crash
    [rest] = next_expansions(RUN, state.spec, state.rounds, 0, set())
    assert rest.missing == (1, 2)
    new.sampled.update({i: events.node_id(RUN, TASK, 1, 3, i) for i in (1, 2)})
    new.scores = {nid: Score(*CRASHED) for nid in new.sampled.values()}
    assert round_complete(rs, state.spec) and next_expansions(RUN, state.spec, state.rounds, 0, set()) == []


def test_a_restarted_sampler_replaying_the_log_re_spends_nothing_twice():
    s = spec(max_extra_siblings=2, round_token_budget=24)
    live = RunState(RUN, s)
    scored_round(live, lambda step, i: CRASHED)  # every expansion crashed: the budget covers one
    evs = _respend.decisions(live, live.round(TASK, 1), 12, "sampler/test")
    assert [(e.group_respent.step, e.group_respent.extra_siblings) for e in evs] == [(0, 2), (1, 0), (2, 0)]
    replayed = RunState(RUN, s)  # a new sampler: the same scores, then the decisions read back
    scored_round(replayed, lambda step, i: CRASHED)
    for e in evs[:1]:  # killed after the first decision went out
        replayed.apply(e)
    again = _respend.decisions(replayed, replayed.round(TASK, 1), 12, "sampler/test")
    assert [e.envelope.event_id for e in again] == [e.envelope.event_id for e in evs[1:]]
    assert [e.group_respent.extra_siblings for e in again] == [0, 0]  # step 0's tokens stay spent
    for e in again:
        replayed.apply(e)
    assert [(x.step, x.missing) for x in next_expansions(RUN, s, replayed.rounds, 0, set())] == [(3, (0, 1))]


def test_reparent_re_runs_the_expansion_from_another_parent_of_the_round():
    state = RunState(RUN, spec(mode="reparent", round_token_budget=10_000))
    scored_round(state, lambda step, i: CRASHED if step == 2 else crashed_first(1, i))
    rs = state.round(TASK, 1)
    [ev] = _respend.decisions(state, rs, 12, "sampler/test")
    d = ev.group_respent
    assert (d.step, d.mode, d.respend_step) == (2, "reparent", 5)
    assert d.HasField("parent_id") and d.parent_id != rs.groups[2].parent_id
    status = {nid: sc.status for g in rs.groups.values() for nid, sc in g.scores.items()}
    assert d.child_mode == ("improve" if status[d.parent_id] == "ok" else "debug")
    [again] = _respend.decisions(state, rs, 12, "sampler/test")
    assert again.group_respent.parent_id == d.parent_id  # seeded by place: the same draw


def test_respending_off_decides_nothing_and_leaves_the_round_as_it_was():
    state = RunState(
        RUN, RunSpec(run_id=RUN, tasks=[TASK], rounds=1, tree={"expansions": 3, "group_size": 4, "drafts": 1})
    )
    scored_round(state, lambda step, i: CRASHED)
    rs = state.round(TASK, 1)
    assert _respend.decisions(state, rs, 12, "sampler/test") == [] and round_complete(rs, state.spec)


# ---- the learner --------------------------------------------------------------------------------
def _group(name: str, rewards, extra=False, expects=0, step=0) -> PendingGroup:
    members = [
        Member(f"{name}-{i}", r, "ok" if r > 0 else "crashed", (1, 2), (3, 4), (-0.1, -0.1), 0)
        for i, r in enumerate(rewards)
    ]
    fut = asyncio.get_running_loop().create_future()
    return PendingGroup(name, TASK, 1, step, 0, members, fut, None, extra, expects)


async def test_a_sync_round_waits_for_the_re_spent_groups_its_expansions_announced():
    buf = GroupBuffer()
    buf.add(_group("g0", [-0.5] * 2, expects=1))
    buf.add(_group("g1", [0.3, 0.6]))
    assert buf.take(2, 0, 0, sync=True) is None  # g0's re-spent group is still out
    buf.add(_group("g0r", [0.2, 0.7], extra=True, step=2))
    buf.add(_group("g0r", [0.2, 0.7], extra=True, step=2))  # a redelivery: one copy
    batch = buf.take(2, 0, 0, sync=True)
    assert [g.group for g in batch.groups] == ["g0", "g1", "g0r"] and len(buf) == 0


async def test_a_re_spent_group_never_completes_a_round_whose_expansions_are_missing():
    buf = GroupBuffer()
    buf.add(_group("g0", [-0.5] * 2, expects=1))
    buf.add(_group("g0r", [0.2, 0.7], extra=True, step=2))
    assert buf.take(2, 0, 0, sync=True) is None  # g1 (an expansion) is missing


async def test_the_learner_skips_groups_without_signal_and_counts_them():
    run_spec = spec()
    learner = RunLearner(LearnerConfig(), RUN, run_spec, None, "learner/test", trace.get_tracer("t"))
    batch = Batch(
        [_group("flat", [-0.5] * 2), _group("mixed", [0.2, 0.8]), _group("new", [0.4, 0.9], extra=True)]
    )
    got = learner.samples(batch)
    assert {s.group for s in got.samples} == {"mixed", "new"} and got.with_signal == 2
    assert got.counts[SKIPPED] == 1.0
    learner.advance(batch)  # every group of the step is consumed once, the skipped one too
    assert learner.trained == {"flat", "mixed", "new"}
    off = RunLearner(
        LearnerConfig(), RUN, RunSpec(run_id=RUN, tasks=[TASK]), None, "l/t", trace.get_tracer("t")
    )
    got = off.samples(Batch([_group("flat", [-0.5] * 2)]))
    assert len(got.samples) == 2 and SKIPPED not in got.counts  # off: today's step, unchanged


def test_group_respent_is_a_sampler_fact_with_its_own_kind():
    body = pb.GroupRespent(sibling_group="abc", task=TASK, round=1, step=0)
    ev = events.make_event(RUN, "sampler/test", body)
    assert (
        events.kind_of(ev) == events.Kind.GROUP_RESPENT and events.subject_of(ev) == "tg.r1.group.respent.abc"
    )
