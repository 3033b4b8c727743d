"""What the sampler checks before a fact of the bus changes its state (issue 32: fuzzed events).

Every check that fails raises: `PermanentError` (dead-lettered at once with the reason) when no
retry can change the answer, `TransientError` (dead-lettered after the consumer's retries) when the
fact may only not be visible yet. A fact that passes is one our own producers could have written.
"""

from __future__ import annotations

from treegrpo import events
from treegrpo.bus import ADAPTERS, Bus, PermanentError, TransientError
from treegrpo.events import Kind
from treegrpo.v1 import events_pb2 as pb


async def require_started(bus: Bus, run_id: str) -> None:
    """A lifecycle fact of a run the sampler holds no state of: the run must exist (else there is
    no run it could end or reopen, and the fact is dead-lettered after the retries)."""
    if await bus.last_event(run_id, Kind.RUN_STARTED) is None:
        raise TransientError(f"run {run_id} has no run.started", 2.0)


def check_group(run_id: str, body: pb.GroupScored) -> None:
    """A group whose id is not its place's: its rewards would land on a group no grader scored."""
    misfit = events.misderived(run_id, body)
    if misfit:
        raise PermanentError(f"not a group of run {run_id}: {misfit}")


async def check_adapter(bus: Bus, limit: int, run_id: str, published: pb.PolicyPublished) -> None:
    """The announced adapter as the object store holds it, from its metadata (nothing downloaded):
    a version whose object is missing, larger than `limit`, or not the announced bytes is never
    pulled (a forged 100 MB one was downloaded and refused again every `pull_after_s`)."""
    key = published.adapter_key
    found = await bus.object_digest(ADAPTERS, key) if key else None
    if found is None:
        raise TransientError(f"v{published.version}: adapter {key!r} is not in the store", 2.0)
    size, sha = found
    if size > limit or size != published.bytes or sha != published.sha256:
        raise PermanentError(
            f"run {run_id} v{published.version}: the stored adapter ({size} bytes, sha256 {sha[:12]}…) "
            f"is not the announced one ({published.bytes} bytes, sha256 {published.sha256[:12]}…; "
            f"at most {limit} bytes)"
        )


async def check_attempt(bus: Bus, event: pb.Event) -> None:
    """A run.ended / run.resumed of an attempt the run never had: dead-lettered after the retries
    (the fact it follows may only not be visible yet), never folded into the run's state."""
    misfit = await bus.attempt_misfit(event.envelope.run_id, event)
    if misfit:
        raise TransientError(f"run {event.envelope.run_id}: {misfit}", 2.0)
