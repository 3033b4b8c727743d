"""OpenTelemetry: one tracer per process, spans continued across services through NATS headers.

Exporters: OTLP/HTTP when an endpoint is configured, a JSON-lines file when a path is, and an
in-memory exporter for tests (`setup_tracing(..., memory=True)`).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping, Sequence

from opentelemetry import propagate, trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import (
    BatchSpanProcessor,
    SimpleSpanProcessor,
    SpanExporter,
    SpanExportResult,
)
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from treegrpo.config import TelemetrySettings

_provider: TracerProvider | None = None
_memory: InMemorySpanExporter | None = None


class JsonlSpanExporter(SpanExporter):
    """Appends one JSON object per finished span; readable with jq, no collector needed."""

    def __init__(self, path: str):
        self._path = path
        self._lock = threading.Lock()

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        with self._lock, open(self._path, "a") as fh:
            for s in spans:
                fh.write(json.dumps(span_record(s)) + "\n")
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        return None


def span_record(s: ReadableSpan) -> dict:
    ctx = s.get_span_context()
    return {
        "name": s.name,
        "trace_id": f"{ctx.trace_id:032x}",
        "span_id": f"{ctx.span_id:016x}",
        "parent_id": f"{s.parent.span_id:016x}" if s.parent else None,
        "service": s.resource.attributes.get("service.name"),
        "start_ns": s.start_time,
        "end_ns": s.end_time,
        "attributes": {k: v if isinstance(v, (str, int, float, bool)) else str(v) for k, v in s.attributes.items()},
    }


def setup_tracing(service: str, cfg: TelemetrySettings | None = None, memory: bool = False) -> trace.Tracer:
    """Install the process's tracer provider once; later calls add nothing and return a tracer."""
    global _provider, _memory
    cfg = cfg or TelemetrySettings()
    if _provider is None:
        _provider = TracerProvider(resource=Resource.create({"service.name": service}))
        if cfg.otlp_endpoint:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

            endpoint = cfg.otlp_endpoint.rstrip("/") + "/v1/traces"
            _provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=endpoint)))
        if cfg.jsonl_path:
            _provider.add_span_processor(SimpleSpanProcessor(JsonlSpanExporter(cfg.jsonl_path)))
        if cfg.enabled:
            trace.set_tracer_provider(_provider)
    if memory and _memory is None:  # tests may ask after the provider exists: add it then
        _memory = InMemorySpanExporter()
        _provider.add_span_processor(SimpleSpanProcessor(_memory))
    return _provider.get_tracer(service) if cfg.enabled or memory else trace.NoOpTracer()


def memory_spans() -> list[ReadableSpan]:
    return list(_memory.get_finished_spans()) if _memory else []


def shutdown_tracing() -> None:
    if _provider is not None:
        _provider.force_flush(5000)


def inject_headers(headers: dict[str, str]) -> dict[str, str]:
    """Add W3C `traceparent`/`tracestate` of the current span to outgoing message headers."""
    propagate.inject(headers)
    return headers


def context_from_headers(headers: Mapping[str, str] | None):
    """The remote parent context carried by a message (or an empty context)."""
    return propagate.extract(dict(headers or {}))
