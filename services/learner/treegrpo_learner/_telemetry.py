"""Spans of a learner step: the step continues the trace of the newest group it trains (and
links the others); phases run in a worker thread become child spans after the fact."""

from __future__ import annotations

from opentelemetry import trace
from opentelemetry.trace import NonRecordingSpan

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
