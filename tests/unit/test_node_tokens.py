"""A node's training payload apart from its node fact (`tokens.recorded`) and back together:
the sampler's facts, `events.tokens_of`, `events.inline_tokens` and `events.TokenJoin`.

Imports a private module: `treegrpo_sampler._expand`, `treegrpo_sampler._state` (the sampler's fact
builder; not on its public surface).
"""

from __future__ import annotations

import pytest

from treegrpo import events
from treegrpo.config import RunSpec
from treegrpo.v1 import events_pb2 as pb

pytestmark = pytest.mark.timeout(30)


def _group(run: str = "r1") -> list[pb.Event]:
    from treegrpo_sampler import _expand
    from treegrpo_sampler._state import RunState
    from treegrpo_sampler.backends import Completion
    from treegrpo_sampler.policy import Expansion

    comps = [
        Completion(f"```python\nprint({i})\n```", [5, i], [-0.5, -0.1 * i], [9, 8, 7], "stop")
        for i in range(3)
    ]
    exp = Expansion("t", 1, 0, "draft", None, events.group_id(run, "t", 1, 0), (0, 1, 2))
    messages = [{"role": "user", "content": "solve it"}]
    state = RunState(run, RunSpec(run_id=run, tasks=["t"], rounds=1))
    return _expand.node_events(state, exp, messages, _expand.Sampled(comps, 3, 1.5), "sampler/s", "s", "m")


def test_the_sampler_records_each_payload_right_before_its_node_fact_which_holds_none_of_it():
    evs = _group()
    kinds = [events.kind_of(e) for e in evs]
    assert kinds == [events.Kind.TOKENS_RECORDED, events.Kind.NODE_SAMPLED] * 3
    for tokens, node in zip(evs[::2], evs[1::2], strict=True):
        t, n = tokens.tokens_recorded, node.node_sampled
        assert t.node_id == n.node_id and n.tokens_recorded and n.code
        assert not (n.prompt_messages or n.prompt_token_ids or n.response_token_ids or n.response_logprobs)
        assert list(t.prompt_token_ids) == [9, 8, 7] and len(t.response_token_ids) == 2
        assert [m.content for m in t.prompt_messages] == ["solve it"]
        assert events.misderived("r1", t) == events.misderived("r1", n) == ""


def test_tokens_of_reads_the_payload_where_the_node_fact_says_it_is():
    evs = _group()
    tokens, node = evs[0].tokens_recorded, evs[1].node_sampled
    assert events.tokens_of(node, tokens) is tokens
    assert events.tokens_of(node, None) is None  # apart, and not at hand (yet)
    other = pb.TokensRecorded(node_id="ffffffffffff", response_token_ids=[1])
    assert events.tokens_of(node, other) is None  # another node's payload is not this one's
    inline = events.inline_tokens(node, tokens)  # as runs before the split (and imports) hold it
    assert not inline.tokens_recorded and list(inline.response_token_ids) == list(tokens.response_token_ids)
    forged = pb.TokensRecorded(node_id=node.node_id, response_token_ids=[7, 7, 7])
    assert list(events.tokens_of(inline, forged).response_token_ids) == list(tokens.response_token_ids)
    assert [m.content for m in events.tokens_of(inline, None).prompt_messages] == ["solve it"]


def test_a_payload_of_another_sampling_of_the_node_is_told_apart_by_its_digest():
    evs = _group()
    tokens, node = evs[0].tokens_recorded, evs[1].node_sampled
    assert node.tokens_digest == events.tokens_digest(tokens) and events.foreign_tokens(node, tokens) == ""
    resampled = pb.TokensRecorded()  # a sampler that crashed between the two facts re-samples the node
    resampled.CopyFrom(tokens)
    resampled.response_token_ids[1] += 1
    assert "another sampling" in events.foreign_tokens(node, resampled)
    assert events.tokens_of(node, resampled) is None
    assert not events.inline_tokens(node, resampled).response_token_ids  # exported without it
    assert "not" in events.foreign_tokens(node, evs[2].tokens_recorded)  # another node's


def test_the_join_puts_each_payload_back_in_stream_order_whatever_order_the_facts_come_in():
    evs = _group()
    join = events.TokenJoin()
    joined = [w for e in evs if (w := join.accept(e)) is not None]
    assert [n.node_id for n in joined] == [e.node_sampled.node_id for e in evs[1::2]]
    assert all(list(n.prompt_token_ids) == [9, 8, 7] and not n.tokens_recorded for n in joined)
    late = events.TokenJoin()  # a node fact before its payload (a foreign writer's order)
    assert late.accept(evs[1]) is None
    assert late.accept(evs[0]).node_id == evs[1].node_sampled.node_id
    lost = events.TokenJoin()  # a payload that never comes: the node is handed out without it
    assert lost.accept(evs[3]) is None and [n.node_id for n in lost.rest()] == [evs[3].node_sampled.node_id]
    old = events.inline_tokens(evs[1].node_sampled, evs[0].tokens_recorded)
    assert events.TokenJoin().accept(pb.Event(node_sampled=old)) == old  # inline: whole at once
