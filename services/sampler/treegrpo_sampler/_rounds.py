"""Ending a task-round, and the run with its last one: the facts the sampler publishes once every
expansion of a round is scored (`policy.round_complete`).

The fact only: the round's summary is a projection of its node events (`treegrpo.archive`), so
ending a round costs no lookup per node.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from treegrpo.v1 import events_pb2 as pb
from treegrpo_sampler._state import RunState
from treegrpo_sampler.policy import RoundState, round_complete

log = logging.getLogger(__name__)
Publish = Callable[[str, Any], Awaitable[Any]]  # (run id, event body): the service's `publish`


async def complete_round(publish: Publish, state: RunState, rs: RoundState, end_run: bool) -> None:
    """Publish `round.completed` once the round is complete (at most once); with `end_run`, also
    `run.completed` when it was the run's last open round."""
    if state.completed or rs.completed or not round_complete(rs, state.spec):
        return
    body = pb.RoundCompleted(task=rs.task, round=rs.round, completed_unix=int(time.time()))
    await publish(state.run_id, body)
    rs.completed = True
    scores = [s for g in rs.groups.values() for s in (g.scores or {}).values()]
    log.info(
        "run %s: %s round %d complete (%d/%d valid)",
        state.run_id,
        rs.task,
        rs.round,
        sum(not s.buggy for s in scores),
        len(scores),
    )
    if state.all_rounds_complete() and not state.completed and end_run:
        await publish(
            state.run_id,
            pb.RunCompleted(outcome="completed", reason="every task's last round is complete"),
        )
        state.completed = True
