#!/usr/bin/env node
// Reads every event of one treegrpo run from NATS JetStream, knowing nothing but the contract:
// the stream and subject layout of docs/CONTRACTS.md and the schema in proto/treegrpo/v1/*.proto,
// loaded at run time (no generated code, no Python). For every message it checks that the payload
// decodes as a treegrpo.v1.Event with exactly one body, that the subject's kind names that body,
// that the envelope belongs to the run and its id is the subject's (sent as Nats-Msg-Id), and that
// the headers carry a W3C traceparent. With --traces DIR it also reads the run's trace files
// (runs/<run>/traces/*.jsonl) as OTLP/JSON lines. Prints a JSON summary; exits 1 on any failure.
//
//   node read_stream.mjs --run <run_id> [--server nats://127.0.0.1:4222] [--proto-dir DIR]
//                        [--stream TREEGRPO] [--timeout-s 30] [--traces runs/<run_id>/traces]
import { readdirSync, readFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";

import { connect } from "nats";
import protobuf from "protobufjs";

const HERE = dirname(fileURLToPath(import.meta.url));
const SUBJECT_ROOT = "tg"; // subjects are tg.<run>.<noun>.<verb>[.<key>...]
const SCHEMA_VERSION = 1;
// W3C trace-context version 00: trace id and span id lower-case hex, neither all zeros
const TRACEPARENT = /^00-(?!0{32})[0-9a-f]{32}-(?!0{16})[0-9a-f]{16}-[0-9a-f]{2}$/;
// The wire kind is the body's field name with '.' for '_', except the one name kept on purpose
// (docs/CONTRACTS.md, "Names"): LearnerStepped travels as learner.step.
const WIRE_EXCEPTIONS = { learner_stepped: "learner.step" };

function options() {
  const { values } = parseArgs({
    options: {
      run: { type: "string" },
      server: { type: "string", default: "nats://127.0.0.1:4222" },
      "proto-dir": { type: "string", default: resolve(HERE, "../../proto/treegrpo/v1") },
      stream: { type: "string", default: "TREEGRPO" },
      "timeout-s": { type: "string", default: "30" },
      traces: { type: "string" },
    },
  });
  if (!values.run) throw new Error("--run <run_id> is required");
  return { ...values, timeoutMs: 1000 * Number(values["timeout-s"]) };
}

// The schema from the .proto files alone; field names kept as written (snake_case).
async function loadSchema(protoDir) {
  const files = readdirSync(protoDir).filter((f) => f.endsWith(".proto")).map((f) => join(protoDir, f));
  const root = await new protobuf.Root().load(files, { keepCase: true });
  root.resolveAll();
  const Event = root.lookupType("treegrpo.v1.Event");
  const kinds = new Map(); // wire kind -> body field
  for (const field of Event.oneofs.body.fieldsArray) {
    kinds.set(WIRE_EXCEPTIONS[field.name] ?? field.name.replace("_", "."), field.name);
  }
  return { Event, kinds };
}

// Every message on tg.<run>.>, in stream order, through an ordered (ephemeral) consumer; the count
// to expect comes from the stream's own per-subject counts, so reading stops at the run's end.
async function* runMessages(nc, opts) {
  const filter = `${SUBJECT_ROOT}.${opts.run}.>`;
  const jsm = await nc.jetstreamManager();
  const info = await jsm.streams.info(opts.stream, { subjects_filter: filter });
  let left = Object.values(info.state.subjects ?? {}).reduce((a, b) => a + b, 0);
  if (left === 0) return;
  const consumer = await nc.jetstream().consumers.get(opts.stream, { filterSubjects: filter });
  const messages = await consumer.consume({ max_messages: 256, expires: opts.timeoutMs });
  for await (const m of messages) {
    yield m;
    if (--left === 0 || m.info.pending === 0) break;
  }
  await messages.close();
}

// The problems of one message (empty when it honours the contract) and its kind.
function check(m, schema, run) {
  const problems = [];
  const tokens = m.subject.split(".");
  const wireKind = tokens.slice(2, 4).join(".");
  const field = schema.kinds.get(wireKind);
  if (tokens[0] !== SUBJECT_ROOT || tokens[1] !== run || !field) {
    problems.push(`subject ${m.subject} names no known kind of run ${run}`);
  }
  const traceparent = m.headers?.get("traceparent") ?? "";
  if (!TRACEPARENT.test(traceparent)) problems.push(`traceparent ${JSON.stringify(traceparent)} is not W3C`);
  let event;
  try {
    event = schema.Event.toObject(schema.Event.decode(m.data), { oneofs: true, longs: String });
  } catch (err) {
    problems.push(`payload does not decode as treegrpo.v1.Event: ${err.message}`);
    return { kind: wireKind, problems };
  }
  const env = event.envelope ?? {};
  if (!event.body) problems.push("event has no body");
  else if (field && event.body !== field) problems.push(`subject kind ${wireKind} carries ${event.body}`);
  if (env.run_id !== run) problems.push(`envelope run_id ${env.run_id} is not ${run}`);
  if (env.schema_version !== SCHEMA_VERSION) problems.push(`schema_version ${env.schema_version}`);
  if (`${SUBJECT_ROOT}.${env.event_id}` !== m.subject) problems.push(`event_id ${env.event_id} != subject`);
  const msgId = m.headers?.get("Nats-Msg-Id");
  if (msgId !== env.event_id) problems.push(`Nats-Msg-Id ${msgId} != event_id ${env.event_id}`);
  if (!env.producer) problems.push("envelope has no producer");
  return { kind: wireKind, problems };
}

// The OTLP/JSON encoding rules a reader outside Python relies on (the OpenTelemetry file exporter's
// format; the schema itself is checked against opentelemetry-proto by the Python tests): the
// resourceSpans/scopeSpans nesting, hex ids, 64-bit times as decimal strings (a JSON number above
// 2^53 loses digits in JavaScript), span kind and status as the enums' integers, no unknown keys.
const SPAN_KEYS = new Set(["traceId", "spanId", "traceState", "parentSpanId", "flags", "name", "kind",
  "startTimeUnixNano", "endTimeUnixNano", "attributes", "droppedAttributesCount", "events",
  "droppedEventsCount", "links", "droppedLinksCount", "status"]);

function spanProblems(span) {
  const problems = Object.keys(span).filter((k) => !SPAN_KEYS.has(k)).map((k) => `unknown span key ${k}`);
  if (!/^(?!0{32})[0-9a-f]{32}$/.test(span.traceId)) problems.push(`traceId ${span.traceId}`);
  if (!/^(?!0{16})[0-9a-f]{16}$/.test(span.spanId)) problems.push(`spanId ${span.spanId}`);
  if (span.parentSpanId && !/^[0-9a-f]{16}$/.test(span.parentSpanId)) problems.push("parentSpanId");
  if (!span.name) problems.push("span has no name");
  if (!Number.isInteger(span.kind ?? 0) || span.kind < 0 || span.kind > 5) problems.push(`kind ${span.kind}`);
  const times = [span.startTimeUnixNano, span.endTimeUnixNano];
  const int64 = (t) => typeof t === "string" && /^\d+$/.test(t); // a number would pass the regex
  if (!times.every(int64)) problems.push("times are not int64 decimal strings");
  else if (BigInt(times[1]) < BigInt(times[0])) problems.push("span ends before it starts");
  if (span.status?.code !== undefined && ![0, 1, 2].includes(span.status.code)) problems.push("status.code");
  return problems;
}

function readTraces(dir, summary) {
  const out = (summary.traces = { files: 0, spans: 0, services: [] });
  for (const file of readdirSync(dir).filter((f) => f.endsWith(".jsonl")).sort()) {
    out.files += 1;
    readFileSync(join(dir, file), "utf8").split("\n").forEach((line, i) => {
      if (!line.trim()) return;
      const fail = (error) => summary.failures.push({ trace_file: file, line: i + 1, error });
      let doc;
      try {
        doc = JSON.parse(line);
      } catch (err) {
        return fail(`not JSON: ${err.message}`);
      }
      if (!Array.isArray(doc.resourceSpans)) return fail("no resourceSpans");
      for (const rs of doc.resourceSpans) {
        const name = rs.resource?.attributes?.find((a) => a.key === "service.name")?.value?.stringValue;
        if (name && !out.services.includes(name)) out.services.push(name);
        if (!Array.isArray(rs.scopeSpans)) fail("resourceSpans without scopeSpans");
        for (const span of (rs.scopeSpans ?? []).flatMap((ss) => ss.spans ?? [])) {
          out.spans += 1;
          spanProblems(span).forEach(fail);
        }
      }
    });
  }
  if (out.spans === 0) summary.failures.push({ error: `no spans in ${dir}` });
}

async function main() {
  const opts = options();
  const schema = await loadSchema(opts["proto-dir"]);
  const nc = await connect({ servers: opts.server, name: "treegrpo-node-reader", timeout: opts.timeoutMs });
  const summary = { run: opts.run, stream: opts.stream, events: 0, traced: 0, kinds: {}, failures: [] };
  const deadline = setTimeout(() => {
    summary.failures.push({ error: `timed out after ${opts["timeout-s"]}s` });
    finish(summary);
  }, opts.timeoutMs + 5000);
  try {
    for await (const m of runMessages(nc, opts)) {
      const { kind, problems } = check(m, schema, opts.run);
      summary.events += 1;
      summary.kinds[kind] = (summary.kinds[kind] ?? 0) + 1;
      if (!problems.some((p) => p.startsWith("traceparent"))) summary.traced += 1;
      for (const error of problems) summary.failures.push({ seq: m.seq, subject: m.subject, error });
    }
  } finally {
    clearTimeout(deadline);
    await nc.close();
  }
  if (summary.events === 0) summary.failures.push({ error: `no events of ${opts.run} on ${opts.stream}` });
  if (opts.traces) readTraces(opts.traces, summary);
  finish(summary);
}

function finish(summary) {
  process.stdout.write(JSON.stringify(summary, null, 2) + "\n");
  process.exit(summary.failures.length ? 1 : 0);
}

main().catch((err) => {
  process.stderr.write(`${err.stack ?? err}\n`);
  process.exit(2);
});
