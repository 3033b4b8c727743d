"""A seed record survives record → events → join unchanged, for any record the schema allows.

Imports a private module: `treegrpo.archive._to_events` (what these tests exercise is not on the
package's public surface).
"""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from treegrpo.archive import (
    ChatMessage,
    GateNodeRecord,
    NodeRecord,
    RunFacts,
    node_json,
    node_record,
    parse_node,
)
from treegrpo.archive._to_events import group_events, node_events

hexid = st.text("0123456789abcdef", min_size=12, max_size=12)
text = st.text(max_size=40)
num = st.floats(allow_nan=False, allow_infinity=False, width=64)
opt_num = st.none() | num


@st.composite
def records(draw) -> NodeRecord:
    gate = draw(st.booleans())
    cls = GateNodeRecord if gate else NodeRecord
    status = draw(
        st.sampled_from(["ok", "crashed", "timeout", "no_code", "invalid_submission", "no_submission"])
    )
    rec = cls(
        id=draw(hexid),
        step=draw(st.integers(0, 7)),
        round=draw(st.integers(1, 20)),
        exp_id="spooky",
        parent_id=draw(st.none() | hexid),
        sibling_group=draw(hexid),
        mode=draw(st.sampled_from(["draft", "improve", "debug"])),
        plan=draw(text),
        code=draw(text),
        raw_completion=draw(text),
        thinking=draw(text),
        prompt_messages=draw(
            st.lists(st.builds(ChatMessage, st.sampled_from(["system", "user"]), text), max_size=3)
        ),
        response_token_ids=draw(st.lists(st.integers(0, 2**32 - 1), max_size=20)),
        response_logprobs=draw(st.lists(num, max_size=20)),
        exc_type=draw(st.none() | st.just("KeyError")),
        exec_time=draw(st.floats(0, 1e4)),
        term_tail=draw(text),
        is_buggy=status != "ok",
        status=status,
        grade_error=draw(st.none() | text),
        test_metric=draw(opt_num),
        oriented=draw(opt_num),
        reward=draw(opt_num),
        source=draw(st.none() | st.sampled_from(["grade", "none"])),
    )
    if gate:
        rec.resources = draw(
            st.none()
            | st.dictionaries(
                st.sampled_from(["cpu", "mem", "ephemeral", "gpu"]), st.integers(0, 64) | st.floats(0, 64)
            )
        )
        if rec.resources is not None:  # the seed's key order, as export writes it
            rec.resources = {
                k: rec.resources[k] for k in ("cpu", "mem", "ephemeral", "gpu") if k in rec.resources
            }
        rec.decl_malformed, rec.decl_deps_ignored = draw(st.booleans()), draw(st.booleans())
        rec.decl_miss_reason = draw(st.none() | text)
        rec.where = draw(st.none() | st.just("k8s:pq-exec-x-a1"))
        rec.exec_timings = draw(
            st.none()
            | st.fixed_dictionaries({k: st.floats(0, 100) for k in ("pending", "stage", "exec", "retrieve")})
        )
        rec.gpu_util = draw(opt_num)
    return rec


def _join(rec: NodeRecord) -> NodeRecord:
    facts = RunFacts("r1")
    sampled, executed, graded = node_events("r1", rec, 16, 0, "m", 1.0)
    for e in (executed, graded, *group_events("r1", [rec], 16, 1.0)):
        facts.add(e)
    return node_record(
        facts.graded[rec.id],
        facts.executed[rec.id],
        facts.rewards.get(rec.id),
        isinstance(rec, GateNodeRecord),
        sampled.node_sampled,
    )


@settings(max_examples=100, suppress_health_check=[HealthCheck.too_slow])
@given(records())
def test_record_survives_json_and_the_event_round_trip(rec):
    assert parse_node(__import__("orjson").loads(node_json(rec))) == _normalise(rec)
    assert node_json(_join(rec)) == node_json(_normalise(rec))


def _normalise(rec: NodeRecord) -> NodeRecord:
    """What JSON keeps of a record: integral resources become ints, maps in the seed's key order."""
    if isinstance(rec, GateNodeRecord) and rec.resources is not None:
        rec.resources = {k: int(v) if float(v).is_integer() else v for k, v in rec.resources.items()}
    if isinstance(rec, GateNodeRecord) and rec.exec_timings is not None:
        rec.exec_timings = {k: rec.exec_timings[k] for k in ("pending", "stage", "exec", "retrieve")}
    return rec
