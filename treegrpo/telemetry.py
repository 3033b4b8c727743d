"""OpenTelemetry: one tracer per process, spans continued across services through NATS headers.

Exporters: OTLP/HTTP when an endpoint is configured, an OTLP/JSON lines file when a path is (the
collector's file-exporter format, which its `otlpjsonfile` receiver reads back), and an in-memory
exporter for tests (`setup_tracing(..., memory=True)`).

Every published event carries a W3C `traceparent` (`event_trace_headers`): the current span's,
else a new root span's, so an outside reader can rely on it for every kind.
"""

from __future__ import annotations

import base64
import hashlib
import json
import threading
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

from google.protobuf import json_format
from opentelemetry import propagate, trace
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import (
    BatchSpanProcessor,
    SimpleSpanProcessor,
    SpanExporter,
    SpanExportResult,
)
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

from treegrpo.config import TelemetrySettings

_provider: TracerProvider | None = None
_memory: InMemorySpanExporter | None = None
_ID_FIELDS = {"traceId": 16, "spanId": 8, "parentSpanId": 8}  # OTLP/JSON writes these bytes as hex
# a proxy until setup_tracing installs the provider, then that provider's (get_tracer per event is slow)
_BUS_TRACER = trace.get_tracer("treegrpo.bus")


class OtlpJsonFileExporter(SpanExporter):
    """Appends one `ExportTraceServiceRequest` per line in OTLP/JSON, as the collector's file
    exporter writes it: readable with jq, and by a collector's `otlpjsonfile` receiver."""

    def __init__(self, path: str):
        self._path = path
        self._lock = threading.Lock()

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        line = json.dumps(otlp_json(spans), separators=(",", ":")) + "\n"
        try:
            with self._lock, open(self._path, "a") as fh:
                fh.write(line)
        except OSError:  # a full disk loses spans, never the work (nor a traceback on the screen)
            return SpanExportResult.FAILURE
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        return None


def _spans_of(doc: dict) -> Iterator[dict]:
    """Every span of a request document, and every link of each (they carry ids too)."""
    for resource_spans in doc.get("resourceSpans", []):
        for scope_spans in resource_spans.get("scopeSpans", []):
            for span in scope_spans.get("spans", []):
                yield span
                yield from span.get("links", [])


def otlp_json(spans: Sequence[ReadableSpan]) -> dict:
    """The OTLP/JSON form of an export request: the OTLP exporter's own protobuf encoding, printed
    with lowerCamelCase names, enums as integers, 64-bit integers as decimal strings, and ids as
    hex (protobuf's JSON would print bytes as base64; OTLP/JSON says hex)."""
    doc = json_format.MessageToDict(encode_spans(spans), use_integers_for_enums=True)
    for item in _spans_of(doc):
        for key in _ID_FIELDS.keys() & item.keys():
            item[key] = base64.b64decode(item[key]).hex()
    return doc


def parse_otlp_json(line: str | bytes) -> ExportTraceServiceRequest:
    """One OTLP/JSON line parsed against the opentelemetry-proto definitions (unknown fields and
    wrong types are errors; ids must be hex of the right length). Raises ValueError."""
    doc = json.loads(line)
    for item in _spans_of(doc):
        for key in _ID_FIELDS.keys() & item.keys():
            raw = bytes.fromhex(item[key])
            if len(raw) != _ID_FIELDS[key]:
                raise ValueError(f"{key} {item[key]!r} is not {_ID_FIELDS[key]} bytes of hex")
            item[key] = base64.b64encode(raw).decode()
    return json_format.ParseDict(doc, ExportTraceServiceRequest())


_SCALARS = ("string_value", "bool_value", "int_value", "double_value")


def _value(any_value):
    """An attribute's value as Python: scalars as they are, arrays and maps as their JSON form."""
    kind = any_value.WhichOneof("value")
    return getattr(any_value, kind) if kind in _SCALARS else json_format.MessageToDict(any_value)


def read_spans(path: str | Path) -> list[dict]:
    """The spans of an OTLP/JSON lines file (e.g. `runs/<run>/traces/<service>.jsonl`), each flat:
    name, service, trace_id, span_id, parent_id (None for a root), kind, status_code, start_ns,
    end_ns, attributes."""
    out = []
    for line in Path(path).read_text().splitlines():
        if not line.strip():
            continue
        for rs in parse_otlp_json(line).resource_spans:
            resource = {a.key: _value(a.value) for a in rs.resource.attributes}
            out += [_flat(span, resource.get("service.name")) for ss in rs.scope_spans for span in ss.spans]
    return out


def _flat(span, service: str | None) -> dict:
    return {
        "name": span.name,
        "service": service,
        "trace_id": span.trace_id.hex(),
        "span_id": span.span_id.hex(),
        "parent_id": span.parent_span_id.hex() or None,
        "kind": span.kind,
        "status_code": span.status.code,
        "start_ns": span.start_time_unix_nano,
        "end_ns": span.end_time_unix_nano,
        "attributes": {a.key: _value(a.value) for a in span.attributes},
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
            _provider.add_span_processor(SimpleSpanProcessor(OtlpJsonFileExporter(cfg.jsonl_path)))
    # the bus's tracer is the global one: a process that records spans (a service with tracing on, a
    # test asking for memory after an earlier setup without it) must have installed ours
    if (cfg.enabled or memory) and trace.get_tracer_provider() is not _provider:
        trace.set_tracer_provider(_provider)
    if memory and _memory is None:  # tests may ask after the provider exists: add it then
        _memory = InMemorySpanExporter()
        _provider.add_span_processor(SimpleSpanProcessor(_memory))
    return _provider.get_tracer(service) if cfg.enabled or memory else trace.NoOpTracer()


def file_tracer(service: str, path: str | Path) -> trace.Tracer:
    """A tracer of its own (not the process's global provider) whose spans go to one OTLP/JSON
    file: for a process that hosts several runs one after the other (the runner: a run and its
    control), each with its own trace folder. Spans are written as they end (nothing buffered, the
    file opened per write), so there is nothing to shut down."""
    provider = TracerProvider(resource=Resource.create({"service.name": service}))
    provider.add_span_processor(SimpleSpanProcessor(OtlpJsonFileExporter(str(path))))
    return provider.get_tracer(service)


def memory_spans() -> list[ReadableSpan]:
    return list(_memory.get_finished_spans()) if _memory else []


def shutdown_tracing() -> None:
    if _provider is not None:
        _provider.force_flush(5000)


def inject_headers(headers: dict[str, str]) -> dict[str, str]:
    """Add W3C `traceparent`/`tracestate` of the current span to outgoing message headers."""
    propagate.inject(headers)
    return headers


def event_trace_headers(event_id: str, kind: str, subject: str) -> dict[str, str]:
    """W3C trace context for one outgoing event, never without a `traceparent`.

    The current span's when there is one. Else a fact starts a trace of its own: a root PRODUCER
    span `publish <kind>` of this process's tracer (recorded, so the trace files hold its root);
    where this process records no spans (tracing off, a CLI), a root context derived from the
    event id, flagged sampled so the consumers' spans under it are kept."""
    if trace.get_current_span().get_span_context().is_valid:
        headers = inject_headers({})
        if "traceparent" in headers:
            return headers
    span = _BUS_TRACER.start_span(
        f"publish {kind}",
        kind=SpanKind.PRODUCER,
        attributes={
            "treegrpo.event_id": event_id,
            "messaging.system": "nats",
            "messaging.destination.name": subject,
        },
    )
    ctx = span.get_span_context()
    span.end()
    if ctx.is_valid:  # a fresh root has no tracestate: the traceparent is all there is to carry
        return {"traceparent": f"00-{ctx.trace_id:032x}-{ctx.span_id:016x}-{int(ctx.trace_flags):02x}"}
    digest = hashlib.sha256(event_id.encode()).hexdigest()
    return {"traceparent": f"00-{digest[:32]}-{digest[32:48]}-01"}


def context_from_headers(headers: Mapping[str, str] | None):
    """The remote parent context carried by a message (or an empty context)."""
    return propagate.extract(dict(headers or {}))
