"""A node's training payload, apart from its `node.sampled` and back together.

The sampler records what the learner trains on (the prompt as served, its token ids, the response's
token ids and behaviour logprobs) as a `tokens.recorded` fact of its own, published right before the
node's `node.sampled`, which then carries `tokens_recorded` and none of the payload: the executor
(which needs the code) and the grader (the completion) read only the small fact. Runs recorded
before the split, and runs imported from an archive (the seed's node records hold the payload
inline), keep the payload in `node.sampled`; the node fact says which, so a reader never guesses:
`tokens_of` gives the payload of either, `inline_tokens` the one-body shape the seed's records
have (export, report), and `TokenJoin` pairs the two facts of a replay in stream order.
"""

from __future__ import annotations

import hashlib

from treegrpo.v1 import events_pb2 as pb

# the NodeSampled fields the payload moved out of (10, 15, 16, 19), by their TokensRecorded names
PAYLOAD = ("prompt_messages", "prompt_token_ids", "response_token_ids", "response_logprobs")
_PLACE = ("node_id", "task", "round", "step", "sibling_group", "group_size", "index_in_group")


def tokens_digest(tokens: pb.TokensRecorded) -> str:
    """16 hex of the sha256 of the payload's deterministic encoding (its node fact records it)."""
    return hashlib.sha256(tokens.SerializeToString(deterministic=True)).hexdigest()[:16]


def tokens_of(sampled: pb.NodeSampled, recorded: pb.TokensRecorded | None) -> pb.TokensRecorded | None:
    """The node's payload: its `tokens.recorded` fact when the node fact says it has one (None while
    that fact is not at hand, or when the one at hand is not this node fact's: `foreign_tokens`),
    else the payload the node fact carries inline (runs recorded before the split, imported runs).
    A `tokens.recorded` of a node whose fact holds its payload inline is never read."""
    if sampled.tokens_recorded:
        if recorded is None or foreign_tokens(sampled, recorded):
            return None
        return recorded
    tokens = pb.TokensRecorded(**{f: getattr(sampled, f) for f in _PLACE})
    for f in PAYLOAD:
        getattr(tokens, f).extend(getattr(sampled, f))
    return tokens


def foreign_tokens(sampled: pb.NodeSampled, recorded: pb.TokensRecorded) -> str:
    """Why `recorded` is not the payload of this node fact ('' when it is): another node's, or
    another sampling's of the node (its digest is not the one the node fact recorded). A sampler
    that crashed after a node's payload reached the stream but before its node fact re-samples the
    node; within the duplicate window the server keeps the first payload, which belongs to a
    completion nobody executed."""
    if recorded.node_id != sampled.node_id:
        return f"tokens.recorded of node {recorded.node_id!r}, not {sampled.node_id!r}"
    if sampled.tokens_digest and tokens_digest(recorded) != sampled.tokens_digest:
        return f"node {sampled.node_id}: tokens.recorded is another sampling's (digest differs)"
    return ""


def inline_tokens(sampled: pb.NodeSampled, recorded: pb.TokensRecorded | None) -> pb.NodeSampled:
    """The node fact with its payload inline, as runs before the split recorded it (the shape the
    seed's node records project from). A node whose payload is missing keeps it empty."""
    if not sampled.tokens_recorded:
        return sampled
    node = pb.NodeSampled()
    node.CopyFrom(sampled)
    node.tokens_recorded = False
    node.ClearField("tokens_digest")
    tokens = tokens_of(sampled, recorded)
    if tokens is not None:
        for f in PAYLOAD:
            getattr(node, f).extend(getattr(tokens, f))
    return node


class TokenJoin:
    """Pairs a replay's `tokens.recorded` and `node.sampled` facts (both kinds, in stream order) into
    node facts with the payload inline. The sampler publishes a node's tokens right before its node
    fact, so a payload waits one message; a node fact whose payload comes later (a foreign writer's
    order) waits for it, and `rest()` hands out those whose payload never came (payload empty)."""

    def __init__(self) -> None:
        self._tokens: dict[str, pb.TokensRecorded] = {}
        self._waiting: dict[str, pb.NodeSampled] = {}

    def accept(self, event: pb.Event) -> pb.NodeSampled | None:
        """The node fact that is whole once this event is taken, or None."""
        if event.HasField("tokens_recorded"):
            tokens = event.tokens_recorded
            waiting = self._waiting.pop(tokens.node_id, None)
            if waiting is not None:
                return inline_tokens(waiting, tokens)
            self._tokens.setdefault(tokens.node_id, tokens)
            return None
        sampled = event.node_sampled
        if not sampled.tokens_recorded:
            return sampled
        tokens = self._tokens.pop(sampled.node_id, None)
        if tokens is None:
            self._waiting.setdefault(sampled.node_id, sampled)
            return None
        return inline_tokens(sampled, tokens)

    def rest(self) -> list[pb.NodeSampled]:
        """The node facts whose payload never came, payload empty, in the order they came."""
        out = [inline_tokens(s, None) for s in self._waiting.values()]
        self._waiting.clear()
        return out
