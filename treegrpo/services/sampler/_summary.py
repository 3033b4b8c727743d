"""`round.completed`: the seed's round summary, computed from the round's graded facts."""

from __future__ import annotations

import time

from treegrpo.bus import Bus
from treegrpo.events import Kind, Status
from treegrpo.services.sampler._state import RunState, gen_llm_seconds, round_nodes
from treegrpo.services.sampler.policy import RoundState
from treegrpo.v1 import events_pb2 as pb


async def round_summary(bus: Bus, state: RunState, rs: RoundState, model: str, adapter_path: str) -> pb.RoundCompleted:
    ids = round_nodes(state, rs)
    valid = 0
    exec_seconds = 0.0
    best: tuple[float, str, float] | None = None  # (oriented, node id, test_metric)
    for nid in ids:
        graded = await bus.last_event(state.run_id, Kind.NODE_GRADED, nid)
        if graded is None:  # the group was scored, so this cannot happen unless the log was trimmed
            continue
        g = graded.node_graded
        exec_seconds += g.exec_time
        if g.status != Status.OK:
            continue
        valid += 1
        if g.HasField("oriented") and g.HasField("test_metric") and (best is None or g.oriented > best[0]):
            best = (g.oriented, nid, g.test_metric)
    started = rs.started_unix or int(time.time())
    body = pb.RoundCompleted(
        task=rs.task, round=rs.round, model=model, adapter_path=adapter_path, nodes=len(ids), valid=valid,
        expansions=state.spec.tree.expansions, phase=state.spec.phase,
        rollout_file=f"round_{rs.round}/{rs.task}__{started}.jsonl",
        workspace=f"{state.run_id}/round_{rs.round}/{rs.task}",
        gen_llm_seconds=gen_llm_seconds(state, rs), gen_exec_seconds=exec_seconds,
        completed_unix=int(time.time()), started_unix=started)
    if best is not None:
        body.best_test_metric, body.best_node_id = best[2], best[1]
    return body
