"""Infrastructure faults: when a node fails on our side, not the policy's.

A node the executor cannot run (sandbox, workspace, object store) or the grader cannot grade
(answers, task data, object store, its own bug) is retried a few times; when its last attempt
fails too, the service records the node with status `infrastructure` instead of dead-lettering it
(which left its group incomplete and the run waiting out `runner.timeout_s`) or blaming the policy
with a failure penalty. The node is then masked out of its group (`treegrpo.advantages`).

One such node is bad luck; several in a row with nothing done between means the service can do
nothing at all (a missing interpreter, answers gone, a broken store): `FaultStreak` says so, and
the service stops as a permanent fault, which stops the run at once with the reason on screen.
"""

from __future__ import annotations

from dataclasses import dataclass

from treegrpo.bus import BusWriteError, Delivery, TransientError, bus_fault_in
from treegrpo.events import INFRASTRUCTURE

__all__ = ["INFRASTRUCTURE", "FaultStreak", "reason_of", "retry_or_give_up"]


def reason_of(exc: BaseException) -> str:
    """One line for a log, a heartbeat and the node's recorded fault, named after the root cause
    (a TransientError raised `from` a SandboxError is a SandboxError to whoever reads it)."""
    text = exc.reason if isinstance(exc, TransientError) else str(exc)
    cause = exc.__cause__ if isinstance(exc, TransientError) and exc.__cause__ is not None else exc
    return f"{type(cause).__name__}: {text}"[:500] if text else type(cause).__name__


def retry_or_give_up(delivery: Delivery, attempts: int, what: str, exc: BaseException, delay_s: float) -> str:
    """Raise TransientError (the message comes back after `delay_s`) while attempts remain; on the
    last one return the line the node is recorded with."""
    reason = reason_of(exc)
    if bus_fault_in(exc) is not None:  # NATS down or full: not the node's fault, nor ours; never masked
        raise BusWriteError(f"{what}: {reason}", delay_s) from exc
    if delivery.num_delivered < attempts:
        raise TransientError(
            f"{what} (attempt {delivery.num_delivered} of {attempts}): {reason}", delay_s
        ) from exc
    return f"{what} failed on our side after {delivery.num_delivered} attempt(s): {reason}"


@dataclass
class FaultStreak:
    """Nodes recorded as infrastructure faults in a row, with no node done between.

    `limit` 0 never trips. `fault()` is True when the streak reaches `limit`: the caller stops."""

    limit: int
    count: int = 0
    last: str = ""

    def ok(self) -> None:
        self.count = 0

    def fault(self, reason: str) -> bool:
        self.count += 1
        self.last = reason
        return self.limit > 0 and self.count >= self.limit

    def message(self, service: str, doing: str) -> str:
        return (
            f"the {service} cannot {doing}: {self.count} nodes in a row failed on our side "
            f"(none succeeded between); last: {self.last}"
        )
