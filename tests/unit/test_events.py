"""Events: deterministic ids, subjects, envelopes, decoding of bad payloads."""

from __future__ import annotations

import pytest

from treegrpo import events
from treegrpo.events import Kind
from treegrpo.v1 import events_pb2 as pb


def test_node_ids_are_deterministic_12_hex_and_distinct_by_position():
    a = events.node_id("r1", "spooky-mini", 1, 0, 3)
    assert a == events.node_id("r1", "spooky-mini", 1, 0, 3)
    assert len(a) == 12 and int(a, 16) >= 0
    assert a != events.node_id("r1", "spooky-mini", 1, 0, 4) != events.node_id("r2", "spooky-mini", 1, 0, 3)


def test_event_id_and_subject_follow_the_natural_key_of_each_fact():
    e = events.make_event("r1", "test", pb.NodeExecuted(node_id="abc123", status="ok"))
    assert e.envelope.event_id == "r1.node.executed.abc123"
    assert events.subject_of(e) == "tg.r1.node.executed.abc123"
    r = events.make_event("r1", "test", pb.RoundCompleted(task="spooky-mini", round=3))
    assert events.subject_of(r) == "tg.r1.round.completed.spooky-mini.3"
    s = events.make_event("r1", "test", pb.RunStarted(rounds=2))
    assert events.subject_of(s) == "tg.r1.run.started"
    assert e.envelope.schema_version == events.SCHEMA_VERSION and e.envelope.producer == "test"


def test_encoding_round_trips_and_is_byte_stable():
    e = events.make_event("r1", "test", pb.NodeSampled(node_id="n1", response_logprobs=[-0.5, -1.25]), at=1.0)
    data = events.encode(e)
    assert events.encode(events.decode(data)) == data
    assert list(events.decode(data).node_sampled.response_logprobs) == [-0.5, -1.25]


@pytest.mark.parametrize(
    "payload", [b"", b"\xff\xfe garbage", b'{"json": true}', pb.Envelope(event_id="x").SerializeToString()]
)
def test_undecodable_payloads_raise_a_typed_error(payload):
    with pytest.raises(events.UndecodableEvent):
        events.decode(payload)


def test_newer_schema_versions_are_refused_not_misread():
    e = events.make_event("r1", "test", pb.RunCompleted(outcome="completed"))
    e.envelope.schema_version = events.SCHEMA_VERSION + 1
    with pytest.raises(events.UndecodableEvent, match="newer"):
        events.decode(events.encode(e))


@pytest.mark.parametrize("bad", ["a.b", "a b", "a*", "a>", ""])
def test_run_ids_that_would_break_subjects_are_rejected(bad):
    with pytest.raises(ValueError):
        events.subject(bad, "node.sampled", "x")


def test_consumer_filters_cover_every_key_of_a_kind():
    assert events.subject_filter("node.sampled") == "tg.*.node.sampled.>"
    assert events.subject_filter("run.started", "r1") == "tg.r1.run.started"


def test_filters_of_a_keys_prefix_a_run_and_a_family_and_the_run_of_a_subject():
    assert events.subject_filter(Kind.POLICY_LOADED, "r1", under="3") == "tg.r1.policy.loaded.3.>"
    assert events.subject_filter(Kind.POLICY_LOADED, "r1", under=("3",)) == "tg.r1.policy.loaded.3.>"
    assert events.run_filter("r1") == "tg.r1.>" and events.run_filter() == "tg.*.>"
    assert events.run_filter("r1", "run") == "tg.r1.run.>"  # run.started, .completed, .ended.*, .resumed.*
    assert events.run_of(events.subject("r-1_x", Kind.NODE_SAMPLED, "n1")) == "r-1_x"
    assert events.run_of("tg.bad$id.node.sampled.n1") is None and events.run_of("tg") is None
    with pytest.raises(ValueError):
        events.subject_filter(Kind.POLICY_LOADED, "r1", under="3.*")  # a key part is one token


@pytest.mark.parametrize(
    "build",
    [
        lambda k: events.subject("r1", k, "x"),
        lambda k: events.subject_filter(k),
        lambda k: events.event_id("r1", k, "x"),
    ],
)
@pytest.mark.parametrize("typo", ["node.sampeld", "learner.stepped", "node", "tg.r1.node.sampled"])
def test_subject_builders_reject_a_kind_that_is_not_one_and_name_the_allowed_ones(build, typo):
    with pytest.raises(ValueError, match=r"unknown event kind .*allowed: run\.started, .*node\.graded"):
        build(typo)


def test_kind_members_build_the_same_subjects_and_ids_as_their_wire_strings():
    for kind in events.Kind:
        assert (
            events.subject("r1", kind, "k")
            == events.subject("r1", kind.value, "k")
            == f"tg.r1.{kind.value}.k"
        )
        assert events.subject_filter(kind) == events.subject_filter(kind.value)
    step = events.make_event("r1", "learner/x", pb.LearnerStepped(step=3))
    assert (
        events.kind_of(step) is events.Kind.LEARNER_STEPPED and step.envelope.event_id == "r1.learner.step.3"
    )


def test_statuses_are_the_seed_archives_six_and_serialise_as_plain_strings():
    import json

    import orjson

    from treegrpo.archive import STATUSES

    assert (
        tuple(events.Status)
        == STATUSES
        == ("ok", "crashed", "timeout", "no_code", "invalid_submission", "no_submission")
    )
    assert set(events.FAILURE_STATUSES) == set(events.Status) - {events.Status.OK}
    record = {"status": events.Status.INVALID_SUBMISSION, "is_buggy": events.Status.INVALID_SUBMISSION.failed}
    plain = {"status": "invalid_submission", "is_buggy": True}
    assert json.dumps(record) == json.dumps(plain) and orjson.dumps(record) == orjson.dumps(plain)
    wire = pb.NodeGraded(status="timeout").SerializeToString()
    assert pb.NodeGraded(status=events.Status.TIMEOUT).SerializeToString() == wire


def test_a_node_or_group_whose_ids_are_not_its_tree_position_is_misderived():
    gid, nid = events.group_id("r1", "t", 1, 2), events.node_id("r1", "t", 1, 2, 1)
    place = {"task": "t", "round": 1, "step": 2, "sibling_group": gid, "group_size": 2}
    assert events.misderived("r1", pb.NodeSampled(node_id=nid, index_in_group=1, **place)) == ""
    assert events.misderived("r1", pb.NodeExecuted(node_id="any", **place)) == ""
    assert events.misderived("r1", pb.GroupScored(sibling_group=gid, task="t", round=1, step=2)) == ""
    assert "node id" in events.misderived("r1", pb.NodeSampled(node_id="f" * 12, index_in_group=1, **place))
    assert "outside" in events.misderived("r1", pb.NodeSampled(node_id=nid, index_in_group=2, **place))
    assert "sibling_group" in events.misderived("r2", pb.NodeGraded(node_id=nid, **place))  # another run's
    assert "sibling_group" in events.misderived(
        "r1", pb.GroupScored(sibling_group=gid, task="t", round=1, step=3)
    )
    assert events.misderived("r1", pb.RunEnded(attempt=77)) == ""  # not a tree fact: judged elsewhere
    # a node's payload is placed in the tree as its node fact is
    assert events.misderived("r1", pb.TokensRecorded(node_id=nid, index_in_group=1, **place)) == ""
    assert "node id" in events.misderived(
        "r1", pb.TokensRecorded(node_id="f" * 12, index_in_group=1, **place)
    )
    assert "sibling_group" in events.misderived(
        "r2", pb.TokensRecorded(node_id=nid, index_in_group=1, **place)
    )


def test_a_nodes_payload_is_a_fact_of_its_own_subject_and_id():
    tokens = events.make_event("r1", "sampler/s", pb.TokensRecorded(node_id="3fa2c01b9e4d"))
    assert tokens.envelope.event_id == "r1.tokens.recorded.3fa2c01b9e4d"
    assert events.subject_of(tokens) == "tg.r1.tokens.recorded.3fa2c01b9e4d"
    assert events.kind_of(tokens) == Kind.TOKENS_RECORDED
    assert events.subject_filter(Kind.TOKENS_RECORDED, "r1") == "tg.r1.tokens.recorded.>"
    # not under any node.* filter: a consumer of node facts never receives a payload
    assert not events.subject_of(tokens).startswith("tg.r1.node.")


def test_only_a_chain_of_resumes_opens_attempts_and_only_their_ends_count():
    from treegrpo.bus import attempts

    assert attempts(ended=[1], resumed=[]) == (1, 1)
    assert attempts(ended=[1, 2], resumed=[2]) == (2, 2)
    assert attempts(ended=[1, 77], resumed=[]) == (1, 1)  # an end of an attempt that never was
    assert attempts(ended=[1], resumed=[3, 50]) == (1, 1)  # resumes that follow no resume 2


def test_a_run_spec_that_names_another_run_or_is_no_json_object_is_refused():
    from treegrpo.config import RunSpec

    text = RunSpec(run_id="r1", tasks=["t"]).model_dump_json()
    assert RunSpec.of_run("r1", text).run_id == "r1"
    for bad, why in (
        (text, "carries the spec of run r1"),
        ("[1]", "not an object"),
        ("{", "is no JSON: Expecting property name"),
    ):
        with pytest.raises(ValueError, match=why):
            RunSpec.of_run("r2" if bad == text else "r1", bad)
