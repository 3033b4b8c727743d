"""A node's attempts: which one is its newest, for readers that must see a retried node as it is now.

A node runs once (attempt 1). `treegrpo run --resume --retry-masked` may run a node whose newest
attempt was masked `infrastructure` again: it records `node.retried` keyed (node id, attempt), and the
retry's `node.executed` and `node.graded` are keyed the same (`events.attempt_key`), beside the
masked attempt's, which stay on the log as history. Attempts are numbered without gaps (a retry is
the node's attempts so far + 1), so the newest is found by asking for the next until there is none:
one lookup for a node never retried.
"""

from __future__ import annotations

from collections.abc import Sequence

from treegrpo.bus import Bus
from treegrpo.events import Kind

__all__ = ["newest_attempt", "newest_attempts"]


async def newest_attempt(bus: Bus, run_id: str, node_id: str) -> int:
    """The node's newest attempt asked for (1 when it was never retried)."""
    return (await newest_attempts(bus, run_id, {node_id: 1}))[node_id]


async def newest_attempts(bus: Bus, run_id: str, known: dict[str, int]) -> dict[str, int]:
    """For each node (id -> the attempt known so far), its newest attempt asked for: one batched
    request per round of retries found (one in all when none was retried)."""
    out = dict(known)
    asking: Sequence[str] = list(known)
    while asking:
        keys = {(nid, str(out[nid] + 1)): nid for nid in asking}
        found = await bus.last_events(run_id, Kind.NODE_RETRIED, list(keys))
        asking = [keys[k] for k in found]
        for nid in asking:
            out[nid] += 1
    return out
