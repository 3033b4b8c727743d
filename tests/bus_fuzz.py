"""Fuzzed messages on every subject a service consumes (issue 32), and what each must come to.

Shared by tests/integration/test_bus_fuzz.py (a few per case) and benchmarks/bus_fuzz.py (1,000
per subject). Cases, per consumed kind (`TOPOLOGY`), against a live run `run_id` unless named:
- `random`: random bytes; `truncated`: a valid event cut short; `unknown_oneof`: an envelope with a
  body field no schema has;
- `wrong_run`: another run's event on this run's subject; `missing_run`: an envelope with no run id;
- `foreign_run`: a well-formed event of a run that does not exist, on its own subject;
- `forged`: a well-formed event of this run whose ids are not its tree position's (node, group),
  whose attempt never was (run.ended, run.resumed), whose spec is not valid (run.started) or whose
  adapter is not in the store (policy.published);
- `duplicate`: a fact of this run already on the stream, with other content, under its own id:
  half with a fresh `Nats-Msg-Id` (stored: a consumer must dead-letter it), half with the fact's
  own (the server drops it within its duplicate window: `seq` None); the one case on the kinds
  that are only looked up (`LOOKED_UP`: a node's `tokens.recorded`), where it must change nothing;
- `oversized`: a field that names a `big`-byte object in the store (a submission, an adapter
  announced with another sha256).
What it must come to: every stored message is dead-lettered, with a reason, by each service that
consumes its kind, and nothing else changes. Not fuzzed: a well-formed fact of a live run that no
fact holds yet (its first `run.completed`, a node at a position it will sample): the first
message on a subject is the fact, and who may write it is NATS permissions' job (docs/DEPLOY.md).
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass

from treegrpo import events
from treegrpo.bus import ADAPTERS, DLQ_STREAM, SUBMISSIONS, Bus
from treegrpo.events import Kind
from treegrpo.v1 import events_pb2 as pb

CONSUMED: dict[Kind, tuple[str, ...]] = {
    k: tuple(sorted(r.consumers)) for k, r in events.TOPOLOGY.items() if r.consumers
}
# kinds a service looks up (no consumer takes them, so nothing dead-letters them): only the
# `duplicate` case, a later message on a fact's own subject, which must change nothing (the
# first fact on a subject stands: the learner trains on the payload the sampler recorded)
LOOKED_UP: tuple[Kind, ...] = (Kind.TOKENS_RECORDED,)
CASES = (
    "random",
    "truncated",
    "unknown_oneof",
    "wrong_run",
    "missing_run",
    "foreign_run",
    "forged",
    "duplicate",
    "oversized",
)
OBJECT_KINDS = (Kind.NODE_EXECUTED, Kind.POLICY_PUBLISHED)  # the kinds whose bodies name an object
# node and group facts: a forged one on a live run's own subjects is dead-lettered by every consumer
# (its ids are not its tree position's), but the run's projections (export, report) still read it
# (their own issue); the fuzz forges them on a run of their own
TREE_KINDS = (Kind.NODE_SAMPLED, Kind.NODE_EXECUTED, Kind.GROUP_SCORED, Kind.NODE_RETRIED)


@dataclass(frozen=True)
class Sent:
    kind: Kind
    case: str
    subject: str
    seq: int | None  # stream sequence; None: dropped by the server (same Nats-Msg-Id)


def _hex(rng: random.Random, n: int = 12) -> str:
    return "".join(rng.choice("0123456789abcdef") for _ in range(n))


def forged_body(kind: Kind, run_id: str, rng: random.Random, task: str = "spooky-mini"):
    """A well-formed body of `kind` that no producer of ours would write for `run_id`."""
    r, s = rng.randint(1, 3), rng.randint(0, 3)
    if kind == Kind.RUN_STARTED:
        spec = rng.choice(["{", "[1]", '{"tasks": []}', json.dumps({"run_id": "another", "tasks": [task]})])
        return pb.RunStarted(run_spec_json=spec, tasks=[task], rounds=1)
    if kind == Kind.RUN_COMPLETED:
        return pb.RunCompleted(outcome="completed", reason="fuzz")
    if kind == Kind.RUN_ENDED:
        return pb.RunEnded(outcome="stopped", reason="fuzz", attempt=rng.choice([0, rng.randint(2, 10**6)]))
    if kind == Kind.RUN_RESUMED:
        return pb.RunResumed(attempt=rng.choice([0, 1, rng.randint(3, 10**6)]))
    if kind == Kind.NODE_SAMPLED:
        return pb.NodeSampled(
            node_id=_hex(rng), task=task, round=r, step=s, sibling_group=_hex(rng), group_size=2,
            mode="draft", code="print('fuzz')",
        )  # fmt: skip
    if kind == Kind.TOKENS_RECORDED:
        return pb.TokensRecorded(
            node_id=_hex(rng), task=task, round=r, step=s, sibling_group=_hex(rng), group_size=2,
            response_token_ids=[3, 4], response_logprobs=[-1.0, -2.0],
        )  # fmt: skip
    if kind == Kind.NODE_EXECUTED:
        return pb.NodeExecuted(
            node_id=_hex(rng), task=task, round=r, step=s, sibling_group=_hex(rng), group_size=2,
            mode="draft", status="ok", submission_key=f"{run_id}/{_hex(rng)}/submission.csv",
        )  # fmt: skip
    if kind == Kind.NODE_RETRIED:  # a retry (--retry-masked) of a node that is not the run's
        return pb.NodeRetried(
            node_id=_hex(rng), task=task, round=r, step=s, sibling_group=_hex(rng), group_size=2,
            index_in_group=rng.randint(0, 1), attempt=rng.randint(2, 5), reason="fuzz",
        )  # fmt: skip
    if kind == Kind.GROUP_SCORED:
        members = [
            pb.GroupMember(node_id=_hex(rng), reward=rng.uniform(-1, 1), status="ok") for _ in range(2)
        ]
        return pb.GroupScored(sibling_group=_hex(rng), task=task, round=r, step=s, members=members)
    if kind == Kind.POLICY_PUBLISHED:
        version = rng.randint(1000, 10**9)
        return pb.PolicyPublished(
            version=version, adapter_key=f"{run_id}/v{version}.tar", sha256=_hex(rng, 64), bytes=1 << 20
        )
    raise ValueError(f"no forged body for {kind}")


def _unknown_oneof(run_id: str, rng: random.Random) -> bytes:
    env = pb.Envelope(event_id=f"{run_id}.fuzz.{_hex(rng)}", run_id=run_id, producer="fuzz", schema_version=1)
    data = rng.randbytes(rng.randint(1, 64))
    # field 99, wire type 2 (length-delimited): a body field no version of the schema has
    return pb.Event(envelope=env).SerializeToString() + bytes([0x9A, 0x06, len(data)]) + data


def _mutated(fact: pb.Event, rng: random.Random) -> pb.Event:
    """The same fact (same id, same subject) with other content."""
    out = pb.Event()
    out.CopyFrom(fact)
    body = events.body_of(out)
    for name in ("code", "status", "run_spec_json", "sha256", "reason"):
        if name in body.DESCRIPTOR.fields_by_name:
            setattr(body, name, getattr(body, name) + f" fuzz {_hex(rng)}")
            return out
    if isinstance(body, pb.GroupScored):
        for m in body.members:
            m.reward = rng.uniform(-5, 5)
        return out
    if isinstance(body, pb.TokensRecorded):  # other behaviour logprobs: a learner misled by them
        body.response_logprobs[:] = [rng.uniform(-9, 0) for _ in body.response_logprobs]
        body.response_token_ids.append(3)
        return out
    out.envelope.producer = "fuzz"  # nothing else to change: a body field added below
    body.SetInParent()
    return out


class Fuzzer:
    """Publishes fuzz for one live run; `big` objects are put once, on the first oversized case."""

    def __init__(self, bus: Bus, run_id: str, seed: int = 0, big: int = 8 << 20):
        self.bus, self.run_id, self.rng, self.big = bus, run_id, random.Random(seed), big
        self._big_keys: dict[str, tuple[str, str]] = {}  # bucket -> (key, sha256)

    async def _big_object(self, bucket: str) -> tuple[str, str]:
        if bucket not in self._big_keys:
            key = (
                f"{self.run_id}/v{10**12}.tar"
                if bucket == ADAPTERS
                else f"fuzz/{_hex(self.rng)}/submission.csv"
            )
            sha, _ = await self.bus.put_object(bucket, key, self.rng.randbytes(self.big))
            self._big_keys[bucket] = (key, sha)
        return self._big_keys[bucket]

    async def one(self, kind: Kind, case: str, facts: dict[Kind, list[pb.Event]]) -> Sent | None:
        """One fuzzed message of `case` on a subject of `kind`; None where the case has none."""
        rng, run = self.rng, self.run_id
        if kind in LOOKED_UP and case != "duplicate":
            return None
        forged = events.make_event(run, self._producer(kind), forged_body(kind, run, rng))
        subject = events.subject_of(forged)
        headers = {"Nats-Msg-Id": f"fuzz-{_hex(rng, 24)}"}
        if case == "random":
            data = rng.randbytes(rng.randint(1, 4096))
        elif case == "truncated":
            whole = events.encode(forged)
            data = whole[: rng.randint(0, len(whole) - 1)]
        elif case == "unknown_oneof":
            data = _unknown_oneof(run, rng)
        elif case == "wrong_run":
            other = events.make_event(f"fz{_hex(rng, 8)}", "fuzz/x", forged_body(kind, run, rng))
            data, subject = (
                events.encode(other),
                events.subject_of(other).replace(f".{other.envelope.run_id}.", f".{run}.", 1),
            )
        elif case == "missing_run":
            forged.envelope.run_id = ""
            data = events.encode(forged)
        elif case == "foreign_run":
            foreign = events.make_event(f"fz{_hex(rng, 8)}", "fuzz/x", forged_body(kind, run, rng))
            data, subject = events.encode(foreign), events.subject_of(foreign)
        elif case == "forged":
            if kind == Kind.RUN_COMPLETED:
                return None  # the run's first run.completed would be the fact (see the module's doc)
            if kind in TREE_KINDS:  # dead-lettered on the live run too, but projections would read it
                forged = events.make_event(
                    f"fz{_hex(rng, 8)}", self._producer(kind), forged_body(kind, run, rng)
                )
            data, subject = events.encode(forged), events.subject_of(forged)
        elif case == "duplicate":
            if not facts.get(kind):
                return None
            dup = _mutated(rng.choice(facts[kind]), rng)
            data, subject = events.encode(dup), events.subject_of(dup)
            if rng.random() < 0.5:
                headers = {"Nats-Msg-Id": dup.envelope.event_id}
        elif case == "oversized":
            if kind not in OBJECT_KINDS:
                return None
            data, subject = await self._oversized(kind)
        else:
            raise ValueError(case)
        ack = await self.bus.js.publish(subject, data, headers=headers)
        return Sent(kind, case, subject, None if ack.duplicate else ack.seq)

    @staticmethod
    def _producer(kind: Kind) -> str:
        """A forger claims to be the kind's producer (the envelope's producer is self-declared)."""
        return f"{min(events.TOPOLOGY[kind].producers)}/fuzz"

    async def _oversized(self, kind: Kind) -> tuple[bytes, str]:
        if kind == Kind.POLICY_PUBLISHED:
            key, sha = await self._big_object(ADAPTERS)
            version = 10**12
            body = pb.PolicyPublished(
                version=version, adapter_key=key, sha256=_hex(self.rng, 64), bytes=self.big
            )
        else:
            key, _ = await self._big_object(SUBMISSIONS)
            body = forged_body(kind, self.run_id, self.rng)
            body.submission_key = key
        run = self.run_id if kind == Kind.POLICY_PUBLISHED else f"fz{_hex(self.rng, 8)}"
        event = events.make_event(run, self._producer(kind), body)
        return events.encode(event), events.subject_of(event)


async def run_facts(bus: Bus, run_id: str) -> dict[Kind, list[pb.Event]]:
    """The run's facts so far, by kind (the `duplicate` case copies them)."""
    out: dict[Kind, list[pb.Event]] = {}
    async for _, event in bus.replay(run_id, [*CONSUMED, *LOOKED_UP]):
        out.setdefault(events.kind_of(event), []).append(event)
    return out


async def dead_letters(bus: Bus) -> dict[tuple[str, int], str]:
    """(service, stream seq) -> reason, for every dead letter on the dead-letter stream."""
    from nats.js import api

    cfg = api.ConsumerConfig(ack_policy=api.AckPolicy.NONE, deliver_policy=api.DeliverPolicy.ALL)
    sub = await bus.js.pull_subscribe("tgdlq.>", durable=None, stream=DLQ_STREAM, config=cfg)
    out: dict[tuple[str, int], str] = {}
    try:
        pending = (await sub.consumer_info()).num_pending
        while pending > 0:
            msgs = await sub.fetch(min(pending, 512), timeout=5)
            for m in msgs:
                body = events.decode(m.data).dead_lettered
                owner = m.subject.split(".")[1]
                out[(owner, body.stream_seq)] = body.reason
            pending = msgs[-1].metadata.num_pending if msgs else 0
    finally:
        await sub.unsubscribe()
    return out


def expected(sent: list[Sent]) -> set[tuple[str, int]]:
    """(service, seq) of every dead letter the fuzz must come to."""
    return {(svc, s.seq) for s in sent if s.seq is not None for svc in CONSUMED.get(s.kind, ())}
