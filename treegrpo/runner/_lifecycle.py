"""A run's identity and ends on the log: unique ids, a start that cannot be joined, a recorded end.

- Run ids are the start time plus 6 random hex digits, so two runs started in the same second get
  two ids; `run.started` is published with `Nats-Expected-Last-Subject-Sequence: 0`, so a run id
  that already exists in the log is refused (atomically, even against a racing runner), never joined.
- Every attempt ends with `run.ended` (completed / stopped / failed, with the reason), keyed by the
  attempt number; `--resume` publishes `run.resumed` with the next one. Services read these
  (`Bus.run_ends`) and never sample or train a run whose latest attempt ended.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
from collections.abc import Coroutine
from datetime import UTC, datetime
from typing import Any, TypeVar

from treegrpo import events
from treegrpo.bus import Bus
from treegrpo.config import ConfigError, RunSpec
from treegrpo.v1 import events_pb2 as pb

log = logging.getLogger(__name__)
T = TypeVar("T")


def new_run_id() -> str:
    return f"{datetime.now(UTC).strftime('%Y%m%d_%H%M%S')}_{secrets.token_hex(3)}"


async def claim_run(bus: Bus, spec: RunSpec) -> None:
    """Publish the run's `run.started`; ConfigError if that run id is taken."""
    body = pb.RunStarted(
        run_spec_json=spec.model_dump_json(),
        tasks=spec.tasks,
        rounds=spec.rounds,
        train=spec.train,
        max_staleness=spec.max_staleness,
        resource_gate=spec.resource_gate,
    )
    if not await bus.claim(events.make_event(spec.run_id, "runner", body)):
        raise ConfigError(
            f"run {spec.run_id!r} already exists in the log: `treegrpo run --resume {spec.run_id}` "
            f"continues it; a new run needs another id"
        )


async def reopen_run(bus: Bus, run_id: str) -> int:
    """Before services start on `--resume`: the attempt this is (reopening an ended run)."""
    ends = await bus.run_ends(run_id)
    if not ends.completed and ends.ended >= ends.attempt:
        await bus.publish(events.make_event(run_id, "runner", pb.RunResumed(attempt=ends.attempt + 1)))
        return ends.attempt + 1
    return ends.attempt  # still open (its runner was killed before it could record an end), or completed


async def end_run(bus: Bus, run_id: str, attempt: int, outcome: str, reason: str) -> None:
    """Record how this attempt ended (and `run.completed`, the terminal fact, when it completed)."""
    if outcome == "completed":
        await bus.publish(
            events.make_event(run_id, "runner", pb.RunCompleted(outcome="completed", reason=reason))
        )
    body = pb.RunEnded(outcome=outcome, reason=reason[:2000], attempt=attempt)
    await bus.publish(events.make_event(run_id, "runner", body))


async def record_end(bus: Bus, run_id: str, attempt: int, outcome: str, reason: str, wait_s: float) -> bool:
    """`end_run`, retried for `wait_s`: the ids are deterministic, so a retry after a lost ack is
    deduplicated by the stream. False if the end could not be recorded (the run stays open)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + wait_s
    while True:
        left = deadline - loop.time()
        try:
            await asyncio.wait_for(end_run(bus, run_id, attempt, outcome, reason), min(10.0, max(1.0, left)))
            return True
        except Exception as exc:
            if left <= 0.5:
                log.warning("the end of run %s was not recorded: %r", run_id, exc)
                return False
            log.warning("recording the end of run %s failed, retrying: %r", run_id, exc)
            await asyncio.sleep(0.5)


async def uninterrupted(work: Coroutine[Any, Any, T]) -> tuple[T, bool]:
    """`work`'s result, run to its end even if the calling task is cancelled meanwhile (asyncio.run's
    answer to a first Ctrl-C), and whether it was. A second Ctrl-C raises KeyboardInterrupt: hard stop."""
    task = asyncio.ensure_future(work)
    interrupted = False
    while True:
        try:
            return await asyncio.shield(task), interrupted
        except asyncio.CancelledError:
            if task.cancelled():  # the work itself was cancelled, not only this wait
                raise
            interrupted = True
