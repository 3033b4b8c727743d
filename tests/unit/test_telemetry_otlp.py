"""Trace files are OTLP/JSON, the OpenTelemetry collector's file format: each line one
`ExportTraceServiceRequest` (resourceSpans / scopeSpans / spans), ids as hex, 64-bit times as
decimal strings, kind and status as the proto's integers; it parses against the official
opentelemetry-proto definitions."""

from __future__ import annotations

import base64
import json
import re

import pytest
from google.protobuf import json_format
from opentelemetry import trace
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.trace.v1.trace_pb2 import Span, Status
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.trace import SpanKind

from treegrpo import telemetry
from treegrpo.telemetry import OtlpJsonFileExporter, event_trace_headers, read_spans

pytestmark = pytest.mark.timeout(30)
TRACEPARENT = re.compile(r"^00-(?!0{32})[0-9a-f]{32}-(?!0{16})[0-9a-f]{16}-01$")


def write_spans(path):
    """A consumer span under a remote parent, with a child that fails, links and events."""
    provider = TracerProvider(resource=Resource.create({"service.name": "grader"}))
    provider.add_span_processor(SimpleSpanProcessor(OtlpJsonFileExporter(str(path))))
    tracer = provider.get_tracer("treegrpo.test")
    with tracer.start_as_current_span("publish node.executed", kind=SpanKind.PRODUCER) as root:
        pass
    link = trace.Link(root.get_span_context(), {"why": "batched"})
    with tracer.start_as_current_span(
        "grader node.executed",
        kind=SpanKind.CONSUMER,
        links=[link],
        attributes={
            "treegrpo.event_id": "r.node.executed.n1",
            "n": 2**62,
            "ok": True,
            "x": 0.5,
            "tags": ["a", "b"],
        },
    ) as parent:
        parent.add_event("graded", {"status": "ok"})
        with pytest.raises(ValueError), tracer.start_as_current_span("grade"):
            raise ValueError("bad submission")
    provider.shutdown()
    return root, parent


def official_parse(line: str) -> ExportTraceServiceRequest:
    """The collector's reading, done with protobuf's own JSON parser: OTLP/JSON writes the id bytes
    as hex where protobuf's JSON mapping has base64, so those fields are converted first."""
    doc = json.loads(line)
    for rs in doc["resourceSpans"]:
        for ss in rs["scopeSpans"]:
            for item in ss["spans"] + [x for s in ss["spans"] for x in s.get("links", [])]:
                for key in ("traceId", "spanId", "parentSpanId"):
                    if key in item:
                        item[key] = base64.b64encode(bytes.fromhex(item[key])).decode()
    return json_format.Parse(json.dumps(doc), ExportTraceServiceRequest())  # unknown fields are errors


def test_trace_file_lines_are_otlp_json_that_the_official_proto_parses(tmp_path):
    path = tmp_path / "grader.jsonl"
    root, parent = write_spans(path)
    lines = path.read_text().splitlines()
    assert len(lines) == 3  # one request per finished span (the processor exports them one by one)
    raw = {
        json.loads(x)["resourceSpans"][0]["scopeSpans"][0]["spans"][0]["name"]: json.loads(x) for x in lines
    }
    span = raw["grader node.executed"]["resourceSpans"][0]["scopeSpans"][0]["spans"][0]
    assert re.fullmatch(r"[0-9a-f]{32}", span["traceId"]) and re.fullmatch(r"[0-9a-f]{16}", span["spanId"])
    assert span["traceId"] == f"{parent.get_span_context().trace_id:032x}"
    assert isinstance(span["startTimeUnixNano"], str) and int(span["startTimeUnixNano"]) == parent.start_time
    assert span["kind"] == Span.SpanKind.SPAN_KIND_CONSUMER and "status" in span
    assert span["links"][0]["spanId"] == f"{root.get_span_context().span_id:016x}"
    parsed = {
        official_parse(x).resource_spans[0].scope_spans[0].spans[0].name: official_parse(x) for x in lines
    }
    req = parsed["grade"]
    resource = {a.key: a.value.string_value for a in req.resource_spans[0].resource.attributes}
    assert resource["service.name"] == "grader"
    grade = req.resource_spans[0].scope_spans[0].spans[0]
    assert grade.parent_span_id == parent.get_span_context().span_id.to_bytes(8, "big")
    assert grade.trace_id == parent.get_span_context().trace_id.to_bytes(16, "big")
    assert grade.status.code == Status.STATUS_CODE_ERROR and "bad submission" in grade.status.message
    assert req.resource_spans[0].scope_spans[0].scope.name == "treegrpo.test"


def test_read_spans_gives_each_span_flat_from_the_proto(tmp_path):
    path = tmp_path / "grader.jsonl"
    root, parent = write_spans(path)
    spans = {s["name"]: s for s in read_spans(path)}
    consumer = spans["grader node.executed"]
    assert consumer["service"] == "grader" and consumer["parent_id"] is None
    assert consumer["span_id"] == f"{parent.get_span_context().span_id:016x}"
    assert consumer["attributes"]["n"] == 2**62 and consumer["attributes"]["ok"] is True
    assert consumer["attributes"]["treegrpo.event_id"] == "r.node.executed.n1"
    assert spans["grade"]["parent_id"] == consumer["span_id"] and spans["grade"]["status_code"] == 2
    assert spans["publish node.executed"]["kind"] == Span.SpanKind.SPAN_KIND_PRODUCER


def test_a_trace_file_with_a_malformed_id_is_rejected(tmp_path):
    path = tmp_path / "grader.jsonl"
    write_spans(path)
    bad = path.read_text().splitlines()[0].replace('"traceId":"', '"traceId":"ab', 1)
    path.write_text(bad + "\n")
    with pytest.raises(ValueError, match="traceId"):
        read_spans(path)


def test_an_event_published_where_nothing_records_spans_still_gets_a_sampled_root_context(monkeypatch):
    monkeypatch.setattr(telemetry, "_BUS_TRACER", trace.NoOpTracer())  # as in a process without tracing
    headers = event_trace_headers("r1.run.started", "run.started", "tg.r1.run.started")
    assert TRACEPARENT.match(headers["traceparent"])
    assert headers == event_trace_headers("r1.run.started", "run.started", "tg.r1.run.started")  # a republish
    assert headers != event_trace_headers("r2.run.started", "run.started", "tg.r2.run.started")
