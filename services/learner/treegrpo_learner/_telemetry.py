"""What a learner step reports: its `learner.step` fact, and its spans: the step continues the
trace of the newest group it trains (and links the others); phases run in a worker thread become
child spans after the fact."""

from __future__ import annotations

from opentelemetry import trace
from opentelemetry.trace import NonRecordingSpan

from treegrpo.v1 import events_pb2 as pb

ORDER = ("old_log_prob", "ref", "update_actor")


def step_context(batch):
    spans = [g.span for g in batch.groups if g.span is not None and g.span.is_valid]
    if not spans:
        return None
    return trace.set_span_in_context(NonRecordingSpan(spans[-1]))


def phase_spans(tracer: trace.Tracer, phases: dict[str, float], start_ns: int) -> None:
    """Child spans of the current span for the trainer's phases, laid end to end from start_ns."""
    t = start_ns
    for name in ORDER:
        seconds = phases.get(name, 0.0)
        if seconds <= 0:
            continue
        span = tracer.start_span(name, start_time=t)
        span.set_attribute("treegrpo.seconds", seconds)
        t += int(seconds * 1e9)
        span.end(end_time=t)


def step_record(
    batch, state, phases: dict[str, float], metrics: dict, got, dropped: int
) -> pb.LearnerStepped:
    """The step's `learner.step` fact so far: `state` the learner's after the step (its version and
    stream position), `got` the batch's samples (groups with signal, staleness); `update_weights`,
    `wake` and `save_checkpoint` are filled in as they happen."""
    rec = pb.LearnerStepped(
        step=state.step,
        policy_version=state.step,
        sibling_groups=[g.group for g in batch.groups],
        staleness=got.staleness,
        groups_with_signal=got.with_signal,
        groups_dropped_stale=dropped,
        last_stream_seq=state.last_stream_seq,
    )
    for k in ("gen", "old_log_prob", "ref", "adv", "update_actor"):
        setattr(rec.phases_s, k, float(phases.get(k, 0.0)))
    if phases.get("sleep"):
        rec.phases_s.sleep = phases["sleep"]
    rec.metrics.update({k: float(v) for k, v in metrics.items()})
    rec.metrics["groups"] = float(len(batch.groups))
    rec.metrics["signal_share"] = got.with_signal / max(1, len(batch.groups))
    return rec
