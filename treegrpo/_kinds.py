"""The event vocabulary: every event kind and every node status, as enums the code can check.

Both are `StrEnum`s, so a member *is* its wire string: it formats into subjects and event ids,
compares equal to the string read back from a message, hashes like it (dict lookups keyed by
either agree) and serialises to the same JSON. What the enums add is one place that names them:
a typo is an `AttributeError` at import, and the subject builders reject a string that is not a
kind instead of building a subject nobody publishes on (an empty lookup, an idle consumer).
"""

from __future__ import annotations

from enum import StrEnum


class Kind(StrEnum):
    """An event kind. The member name is the proto `Event.body` field (`LearnerStepped` ->
    `LEARNER_STEPPED`); the value is the `<noun>.<verb>` token pair of its subjects and ids."""

    RUN_STARTED = "run.started"
    RUN_COMPLETED = "run.completed"
    RUN_ENDED = "run.ended"
    RUN_RESUMED = "run.resumed"
    ROUND_STARTED = "round.started"
    ROUND_COMPLETED = "round.completed"
    NODE_SAMPLED = "node.sampled"
    NODE_EXECUTED = "node.executed"
    NODE_GRADED = "node.graded"
    GROUP_SCORED = "group.scored"
    # the one wire string that is not a past participle: subjects, event ids (Nats-Msg-Id) and
    # NATS permissions of every stored stream use it, so it stays (docs/CONTRACTS.md, "Names")
    LEARNER_STEPPED = "learner.step"
    LEARNER_RESTORED = "learner.restored"
    POLICY_PUBLISHED = "policy.published"
    POLICY_LOADED = "policy.loaded"
    DEAD_LETTERED = "dead.lettered"
    GROUP_RESPENT = "group.respent"
    TOKENS_RECORDED = "tokens.recorded"
    NODE_RETRIED = "node.retried"

    @property
    def field(self) -> str:
        """The `Event.body` oneof field that carries this kind's body (e.g. `learner_stepped`)."""
        return self.name.lower()


# kinds with one fact per run: their subject has no key (`tg.<run>.run.started`)
KEYLESS: frozenset[Kind] = frozenset({Kind.RUN_STARTED, Kind.RUN_COMPLETED})


# member or wire string -> the plain wire string: one dict lookup on the publish path, where
# formatting an enum member costs more than the rest of building a subject
_WIRE: dict[str, str] = {k.value: k.value for k in Kind}


def as_kind(value: str) -> Kind:
    """`value` as a Kind; ValueError naming the allowed kinds when it is none."""
    return Kind(wire(value))


def wire(kind: Kind | str) -> str:
    """The wire string of a kind (a member or its string); ValueError naming the allowed kinds."""
    try:
        return _WIRE[kind]
    except (KeyError, TypeError):
        raise ValueError(f"unknown event kind {kind!r}; allowed: {', '.join(_WIRE)}") from None


class Status(StrEnum):
    """A node's status (`node.executed.status`, `node.graded.status`, the archive's `status`).

    The executor sets any but `invalid_submission`; the grader's final status is `ok` or
    `invalid_submission` for a node that ran and wrote a submission, else the executor's copied.
    The order is the seed archive's (reports list statuses in it)."""

    OK = "ok"  # ran, wrote a submission (and, once graded, it scored)
    CRASHED = "crashed"  # exited non-zero (`exc_type` names the exception)
    TIMEOUT = "timeout"  # killed at the time limit
    NO_CODE = "no_code"  # the completion had no code block to run
    INVALID_SUBMISSION = "invalid_submission"  # the grader refused the submission (`grade_error`)
    NO_SUBMISSION = "no_submission"  # ran to the end without writing a submission

    @property
    def failed(self) -> bool:
        """Counts as buggy (`is_buggy`) and takes a failure penalty."""
        return self is not Status.OK


# the statuses of a node that did not yield a valid submission (one penalty each)
FAILURE_STATUSES: tuple[Status, ...] = tuple(s for s in Status if s.failed)

# Not a `Status`: no outcome of the policy's. The status string of a node that our side could not
# execute or grade (sandbox, workspace, object store, answers: after their retries); the node is
# masked out of its group (no reward, no gradient, never a parent), counted apart from the seed's
# six statuses, and left out of seed-format exports, whose node files keep those six only.
INFRASTRUCTURE = "infrastructure"
