"""Events: the typed facts on the stream, their subjects and their deterministic ids.

Every message is a `treegrpo.v1.Event` (an envelope plus one body). Its subject is
`tg.<run_id>.<kind>[.<key>]`, e.g. `tg.r1.node.sampled.3fa2c01b9e4d`; its id is
`<run_id>.<kind>[.<key>]`, sent as `Nats-Msg-Id` so a republish after a crash is dropped by the
server's duplicate window. Keys make every event addressable, so "the executed fact of node X" is
one direct lookup (`Bus.last_event`).
"""

from __future__ import annotations

import hashlib
import re
import time as _time

from google.protobuf.message import DecodeError

from treegrpo._kinds import FAILURE_STATUSES, INFRASTRUCTURE, KEYLESS, Kind, Status, as_kind, wire
from treegrpo._tokens import TokenJoin, foreign_tokens, inline_tokens, tokens_digest, tokens_of
from treegrpo._topology import TOPOLOGY, Route, topology_markdown
from treegrpo.v1 import events_pb2 as pb

__all__ = [
    "FAILURE_STATUSES",
    "IMPORTED_PRODUCER",
    "INFRASTRUCTURE",
    "KINDS",
    "Kind",
    "Route",
    "SCHEMA_VERSION",
    "Status",
    "SUBJECT_ROOT",
    "TOPOLOGY",
    "TokenJoin",
    "UndecodableEvent",
    "as_kind",
    "attempt_key",
    "body_of",
    "check_token",
    "decode",
    "default_key",
    "describe_restored",
    "encode",
    "event_id",
    "foreign_tokens",
    "group_id",
    "inline_tokens",
    "key_parts",
    "kind_of",
    "make_event",
    "misderived",
    "node_id",
    "run_filter",
    "run_of",
    "short_hash",
    "subject",
    "subject_filter",
    "subject_of",
    "tokens_digest",
    "tokens_of",
    "topology_markdown",
    "wire",
]

SCHEMA_VERSION = 1
IMPORTED_PRODUCER = "archive-import"  # producer of history appended by `treegrpo archive import`
SUBJECT_ROOT = "tg"

# oneof field name -> kind (subject suffix)
KINDS: dict[str, Kind] = {k.field: k for k in Kind}
_BODY_TYPES = {name: pb.Event.DESCRIPTOR.fields_by_name[name].message_type.name for name in KINDS}
_TOKEN = re.compile(r"^[A-Za-z0-9_\-]+$")


class UndecodableEvent(ValueError):
    """The payload is not a valid treegrpo Event (garbage, wrong schema, or no body)."""


def check_token(value: str, what: str) -> str:
    """Subject tokens may not contain '.', '*', '>' or whitespace; ids must be safe in file names too."""
    if not _TOKEN.match(value):
        raise ValueError(f"{what} {value!r} must match [A-Za-z0-9_-]+")
    return value


def kind_of(event: pb.Event) -> Kind:
    field = event.WhichOneof("body")
    if field is None:
        raise UndecodableEvent("event has no body")
    return KINDS[field]


def body_of(event: pb.Event):
    """The body message (e.g. a NodeSampled) of an event."""
    field = event.WhichOneof("body")
    if field is None:
        raise UndecodableEvent("event has no body")
    return getattr(event, field)


def key_parts(key: str | tuple | None) -> str:
    if key is None or key == "":
        return ""
    parts = key if isinstance(key, tuple) else (key,)
    return ".".join(check_token(str(p), "key part") for p in parts)


def subject(run_id: str, kind: Kind | str, key: str | tuple | None = None) -> str:
    """The exact subject of one fact; ValueError for a kind that is not a `Kind`."""
    kind = wire(kind)
    suffix = key_parts(key)
    base = f"{SUBJECT_ROOT}.{check_token(run_id, 'run id')}.{kind}"
    return f"{base}.{suffix}" if suffix else base


def subject_filter(kind: Kind | str, run_id: str = "*", under: str | tuple | None = None) -> str:
    """A consumer filter for every event of one kind (all keys, or the keys that begin with the
    parts `under`, e.g. a version's `policy.loaded`), in one run or all runs; ValueError for a
    kind that is not a `Kind` (a filter nothing matches would idle silently)."""
    kind = wire(kind)
    if kind in KEYLESS:
        return f"{SUBJECT_ROOT}.{run_id}.{kind}"
    prefix = key_parts(under)
    return f"{SUBJECT_ROOT}.{run_id}.{kind}.{prefix}.>" if prefix else f"{SUBJECT_ROOT}.{run_id}.{kind}.>"


def run_filter(run_id: str = "*", family: str | None = None) -> str:
    """A filter for every event of a run (or of all runs), or of one family of its kinds (`run`:
    run.started, run.completed, run.ended.*, run.resumed.*)."""
    base = f"{SUBJECT_ROOT}.{run_id}"
    return f"{base}.{check_token(family, 'kind family')}.>" if family else f"{base}.>"


def run_of(subject: str) -> str | None:
    """The run id of a `tg.<run>.<kind>...` subject; None when its second token is no run id."""
    parts = subject.split(".")
    return parts[1] if len(parts) > 2 and _TOKEN.match(parts[1]) else None


def event_id(run_id: str, kind: Kind | str, key: str | tuple | None = None) -> str:
    kind = wire(kind)
    suffix = key_parts(key)
    return f"{run_id}.{kind}.{suffix}" if suffix else f"{run_id}.{kind}"


def default_key(body) -> tuple | str | None:
    """The natural key of each fact: what makes it unique within a run."""
    name = type(body).__name__
    if name in ("NodeSampled", "TokensRecorded"):
        return body.node_id
    if name in ("NodeExecuted", "NodeGraded", "NodeRetried"):  # a retried node's later attempts
        return attempt_key(body.node_id, body.attempt)
    if name in ("GroupScored", "GroupRespent"):  # one decision per zero-variance group
        return body.sibling_group
    if name in ("RoundStarted", "RoundCompleted"):
        return (body.task, str(body.round))
    if name == "LearnerStepped":
        return str(body.step)
    if name == "PolicyPublished":
        return str(body.version)
    if name == "PolicyLoaded":
        return (str(body.version), body.sampler_id)
    if name in ("RunEnded", "RunResumed"):
        return str(body.attempt)
    if name == "LearnerRestored":  # a version can be restored more than once (crash after crash)
        return (str(body.version), str(body.restore))
    if name == "DeadLettered":
        return (body.consumer, str(body.stream_seq))
    return None


def attempt_key(node_id: str, attempt: int) -> str | tuple[str, str]:
    """The key of a node's executed or graded fact of one attempt: the node id for its first (0 or
    1: every node before `--retry-masked`), (node id, attempt) for a retry's, so a masked attempt's
    fact stays on its own subject as history and the retry's lies beside it."""
    return node_id if attempt <= 1 else (node_id, str(attempt))


def make_event(
    run_id: str, producer: str, body, key: str | tuple | None = None, at: float | None = None
) -> pb.Event:
    """Wrap a body message in an envelope with a deterministic id."""
    field = _field_for(body)
    ev = pb.Event()
    k = default_key(body) if key is None else key
    ev.envelope.event_id = event_id(run_id, KINDS[field], k)
    ev.envelope.run_id = run_id
    ev.envelope.time = _time.time() if at is None else at
    ev.envelope.producer = producer
    ev.envelope.schema_version = SCHEMA_VERSION
    getattr(ev, field).CopyFrom(body)
    return ev


def subject_of(event: pb.Event) -> str:
    kind = wire(kind_of(event))
    prefix = f"{event.envelope.run_id}.{kind}"
    suffix = event.envelope.event_id[len(prefix) + 1 :] if event.envelope.event_id != prefix else ""
    return f"{SUBJECT_ROOT}.{prefix}.{suffix}" if suffix else f"{SUBJECT_ROOT}.{prefix}"


def encode(event: pb.Event) -> bytes:
    return event.SerializeToString(deterministic=True)


def decode(data: bytes) -> pb.Event:
    ev = pb.Event()
    try:
        ev.ParseFromString(data)
    except (DecodeError, RuntimeError, ValueError) as exc:
        raise UndecodableEvent(f"not a treegrpo Event: {exc}") from exc
    if ev.WhichOneof("body") is None or not ev.envelope.event_id:
        raise UndecodableEvent("payload parsed but carries no envelope id or body")
    if ev.envelope.schema_version > SCHEMA_VERSION:
        raise UndecodableEvent(f"schema_version {ev.envelope.schema_version} is newer than {SCHEMA_VERSION}")
    return ev


def _field_for(body) -> str:
    name = type(body).__name__
    for field, type_name in _BODY_TYPES.items():
        if type_name == name:
            return field
    raise TypeError(f"{name} is not an event body")


def short_hash(*parts: object, n: int = 12) -> str:
    h = hashlib.sha256("\x1f".join(str(p) for p in parts).encode()).hexdigest()
    return h[:n]


def node_id(run_id: str, task: str, round_: int, step: int, index: int) -> str:
    """12-hex node id, a pure function of where the node sits: a re-sample gets the same id."""
    return short_hash("node", run_id, task, round_, step, index)


def group_id(run_id: str, task: str, round_: int, step: int) -> str:
    return short_hash("group", run_id, task, round_, step)


_GROUPED = ("NodeSampled", "NodeExecuted", "NodeGraded", "GroupScored", "TokensRecorded", "NodeRetried")
_INDEXED = ("NodeSampled", "TokensRecorded", "NodeRetried")  # facts that carry the node's index in its group


def misderived(run_id: str, body) -> str:
    """Why a node or group fact's ids are not the ones its place in the tree derives ('' if they
    are). Ids are pure functions of (run, task, round, step[, index]): a fact whose ids are not was
    written by no producer of ours (fuzz, a corrupt or foreign writer), and handling it would put a
    node or a group into a run that never had it. History imported from an archive keeps the
    archive's ids; services never handle it (`IMPORTED_PRODUCER`)."""
    name = type(body).__name__
    if name not in _GROUPED:
        return ""
    if body.sibling_group != group_id(run_id, body.task, body.round, body.step):
        return (
            f"sibling_group {body.sibling_group!r} is not the group of task {body.task!r} "
            f"round {body.round} step {body.step} of run {run_id}"
        )
    if name == "GroupScored":
        return ""
    if body.group_size < 1:
        return f"node {body.node_id!r}: group_size {body.group_size}"
    if name == "NodeRetried" and body.attempt < 2:
        return f"node {body.node_id!r}: a retry's attempt is 2 or more, not {body.attempt}"
    if name in _INDEXED:
        if body.index_in_group >= body.group_size:
            return f"node {body.node_id!r}: index {body.index_in_group} outside a group of {body.group_size}"
        if body.node_id != node_id(run_id, body.task, body.round, body.step, body.index_in_group):
            return f"node id {body.node_id!r} is not that of its place in the tree"
    return ""


def describe_restored(fact: pb.LearnerRestored) -> str:
    """A `learner.restored` fact in one line (the learner's log, the runner's screen, `tail`)."""
    source = {
        "checkpoint": f"checkpoint {fact.checkpoint}",
        "published": f"published adapter v{fact.adapter_version} (sha256 {fact.adapter_sha256[:12]}…)",
    }.get(fact.weights_from, "the base weights")
    text = f"learner restored version {fact.version} from {source}"
    if fact.replayed_steps:
        text += f" + {fact.replayed_steps} step(s) re-trained from the log"
    if fact.skipped:
        text += "; skipped: " + "; ".join(fact.skipped)
    if fact.lost:
        text += "; lost: " + "; ".join(fact.lost)
    return text
