// Tracing of the calls a sidecar serves and makes, over real sockets: the
// host's trace context (sent as @grpc/grpc-js metadata, as grpc-go sends it)
// becomes the parent of the handler's span, and the handler's Cluster calls
// carry the handler's context to a Cluster service served by @grpc/grpc-js.
import assert from "node:assert/strict";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, beforeEach, describe, test, type TestContext } from "node:test";

import { context, ProxyTracerProvider, SpanKind, trace, type Span } from "@opentelemetry/api";
import { AsyncLocalStorageContextManager } from "@opentelemetry/context-async-hooks";
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor, type ReadableSpan } from "@opentelemetry/sdk-trace-base";

import { DeniedError } from "./errors.js";
import { ValidateRequestSchema, ValidateResponseSchema } from "./gen/polyop/v1alpha1/admission_pb.js";
import { ClusterService } from "./gen/polyop/v1alpha1/cluster_pb.js";
import {
  ReconcileRequestSchema,
  ReconcileResponseSchema,
  ReconcileStreamRequestSchema,
  ReconcileStreamResponseSchema,
  type ReconcileStreamResponse,
} from "./gen/polyop/v1alpha1/reconcile_pb.js";
import { SidecarService } from "./gen/polyop/v1alpha1/sidecar_pb.js";
import { GrpcClient, serveUnary } from "./grpcjs.testutil.js";
import { jsonLogger, type LogFields } from "./log.js";
import type { KubeObject } from "./objects.js";
import { Sidecar } from "./sidecar.js";
import { tracingEnabled } from "./tracing.js";

type Widget = KubeObject<{ size: number }, { seen?: number }>;
const widgets = { apiVersion: "example.com/v1", kind: "Widget" };
const configMaps = { apiVersion: "v1", kind: "ConfigMap" };
const json = (v: unknown) => new TextEncoder().encode(JSON.stringify(v));

const HOST_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736";
const HOST_SPAN = "00f067aa0ba902b7";
const HOST_CONTEXT = { traceparent: `00-${HOST_TRACE}-${HOST_SPAN}-01`, baggage: "polyop.reconcile_id=5f1c6c1e-8d1f-4b4e-9a55-3a9d0c7f1e2b" };

/** What a handler saw of tracing. */
interface Seen {
  span?: Span;
  active?: Span | undefined;
}

/**
 * A sidecar on a unix socket whose reconciler reads a ConfigMap through a
 * Cluster service on another socket, which records the traceparent of each
 * call; and a grpc-js client to call the sidecar.
 */
async function setUp(t: TestContext) {
  const dir = await mkdtemp(join(tmpdir(), "po-"));
  t.after(() => rm(dir, { recursive: true, force: true }));
  const clusterCalls: Array<{ traceparent: string; baggage: string }> = [];
  const cluster = await serveUnary(`unix:${join(dir, "cluster.sock")}`, ClusterService, {
    get: (_req, metadata) => {
      clusterCalls.push({ traceparent: String(metadata.get("traceparent")[0] ?? ""), baggage: String(metadata.get("baggage")[0] ?? "") });
      return { object: json({ ...configMaps, metadata: { namespace: "default", name: "settings" } }) };
    },
  });
  t.after(() => cluster.stop());

  const logs: LogFields[] = [];
  const seen: Seen = {};
  const sidecar = new Sidecar({
    name: "widget-operator",
    clusterAddress: `unix://${join(dir, "cluster.sock")}`,
    logger: jsonLogger({ level: "debug", write: (line) => logs.push(JSON.parse(line) as LogFields) }),
  })
    .reconciler<Widget>({ for: widgets }, async (w, ctx) => {
      seen.span = ctx.span;
      await ctx.cluster.get(configMaps, { namespace: "default", name: "settings" });
      seen.active = trace.getActiveSpan(); // after an await: the context follows the handler
      ctx.log.info("Reconciled", { size: w.spec.size });
      w.status = { seen: w.spec.size };
      return { requeueAfter: 60_000 };
    })
    .validator<Widget>({ for: widgets }, (w) => {
      if (w.spec.size < 0) {
        throw new DeniedError("size must not be negative");
      }
    });
  const server = await sidecar.start({ address: `unix://${join(dir, "sidecar.sock")}` });
  t.after(() => server.stop());
  const client = new GrpcClient(`unix://${join(dir, "sidecar.sock")}`);
  t.after(() => client.close());

  const request = {
    controller: "widget",
    kind: { group: "example.com", version: "v1", kind: "Widget" },
    key: { namespace: "default", name: "w" },
    retries: 2,
    object: json({ ...widgets, metadata: { namespace: "default", name: "w" }, spec: { size: 3 } }),
  };
  const reconcile = (headers: Record<string, string> = {}) =>
    client.unary(SidecarService, "Reconcile", ReconcileRequestSchema, ReconcileResponseSchema, request, 5000, headers);
  /** The same Reconcile as a call on ReconcileStream, its trace context in the request's trace_context. */
  const reconcileOnStream = (traceContext: Record<string, string> = {}) => {
    const stream = client.bidiStream(SidecarService, "ReconcileStream", ReconcileStreamRequestSchema, ReconcileStreamResponseSchema);
    const answer = new Promise<ReconcileStreamResponse>((resolve, reject) => {
      stream.once("data", resolve);
      stream.once("error", reject);
    });
    stream.write({ id: 1n, call: { case: "reconcile", value: request }, timeout: { seconds: 5n }, traceContext });
    return answer.finally(() => stream.cancel());
  };
  const validate = (size: number, headers: Record<string, string> = {}) =>
    client.unary(
      SidecarService,
      "Validate",
      ValidateRequestSchema,
      ValidateResponseSchema,
      {
        request: {
          uid: "u",
          kind: { group: "example.com", version: "v1", kind: "Widget" },
          key: { namespace: "default", name: "w" },
          object: json({ ...widgets, metadata: { namespace: "default", name: "w" }, spec: { size } }),
        },
      },
      5000,
      headers,
    );
  return { reconcile, reconcileOnStream, validate, clusterCalls, logs, seen };
}

/** The traceparent header's trace ID and parent span ID. */
function parseTraceparent(header: string): { traceId: string; parentId: string } {
  const [, traceId = "", parentId = ""] = header.split("-");
  return { traceId, parentId };
}

function onlySpan(spans: ReadableSpan[], name: string): ReadableSpan {
  const found = spans.filter((s) => s.name === name);
  assert.equal(found.length, 1, `one span named ${name} among ${JSON.stringify(spans.map((s) => s.name))}`);
  return found[0]!;
}

describe("with the application's tracer provider", () => {
  const exporter = new InMemorySpanExporter();
  const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
  before(() => {
    assert.ok(trace.setGlobalTracerProvider(provider));
    assert.ok(context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable()));
  });
  after(async () => {
    await provider.shutdown();
    trace.disable();
    context.disable();
  });
  beforeEach(() => exporter.reset());

  test("a Reconcile carrying the host's trace runs in a child span, active in the handler, and its Cluster calls continue it", async (t) => {
    const { reconcile, clusterCalls, logs, seen } = await setUp(t);
    await reconcile(HOST_CONTEXT);

    const spans = exporter.getFinishedSpans();
    const server = onlySpan(spans, "polyop.v1alpha1.SidecarService/Reconcile");
    assert.equal(server.kind, SpanKind.SERVER);
    assert.equal(server.spanContext().traceId, HOST_TRACE);
    assert.equal(server.parentSpanContext?.spanId, HOST_SPAN);
    assert.deepEqual(
      {
        controller: server.attributes["polyop.controller"],
        kind: server.attributes["polyop.kind"],
        namespace: server.attributes["polyop.namespace"],
        name: server.attributes["polyop.name"],
        retries: server.attributes["polyop.retries"],
        reconcileId: server.attributes["polyop.reconcile_id"],
        result: server.attributes["polyop.result"],
      },
      {
        controller: "widget",
        kind: "Widget",
        namespace: "default",
        name: "w",
        retries: 2,
        reconcileId: "5f1c6c1e-8d1f-4b4e-9a55-3a9d0c7f1e2b",
        result: "requeue",
      },
    );

    // The handler's ctx.span and trace.getActiveSpan() are the server span.
    assert.equal(seen.span?.spanContext().spanId, server.spanContext().spanId);
    assert.equal(seen.active?.spanContext().spanId, server.spanContext().spanId);

    // The Cluster call is a client span under the handler's, and the host received its context.
    const get = onlySpan(spans, "polyop.v1alpha1.ClusterService/Get");
    assert.equal(get.kind, SpanKind.CLIENT);
    assert.equal(get.parentSpanContext?.spanId, server.spanContext().spanId);
    assert.equal(clusterCalls.length, 1);
    assert.deepEqual(parseTraceparent(clusterCalls[0]!.traceparent), { traceId: HOST_TRACE, parentId: get.spanContext().spanId });
    assert.equal(clusterCalls[0]!.baggage, HOST_CONTEXT.baggage);

    // The handler's log lines name the trace, the span and the reconcile.
    const line = logs.find((l) => l["msg"] === "Reconciled");
    assert.ok(line, JSON.stringify(logs));
    assert.deepEqual(
      [line["trace_id"], line["span_id"], line["reconcileID"], line["controller"], line["kind"], line["namespace"], line["name"]],
      [HOST_TRACE, server.spanContext().spanId, "5f1c6c1e-8d1f-4b4e-9a55-3a9d0c7f1e2b", "widget", "Widget", "default", "w"],
    );
  });

  test("a Reconcile on ReconcileStream carrying the host's trace runs in a child span, and logs with the unary call's keys", async (t) => {
    const { reconcile, reconcileOnStream, logs } = await setUp(t);
    await reconcile(HOST_CONTEXT);
    const answer = await reconcileOnStream(HOST_CONTEXT);
    assert.equal(answer.result.case, "reconcile");

    const servers = exporter.getFinishedSpans().filter((s) => s.name === "polyop.v1alpha1.SidecarService/Reconcile");
    assert.equal(servers.length, 2);
    const [unary, stream] = servers as [ReadableSpan, ReadableSpan];
    assert.equal(stream.kind, SpanKind.SERVER);
    assert.equal(stream.spanContext().traceId, HOST_TRACE);
    assert.equal(stream.parentSpanContext?.spanId, HOST_SPAN);
    assert.deepEqual(stream.attributes, unary.attributes, "the same attributes: controller, object, retries, reconcile ID, result");

    const lines = logs.filter((l) => l["msg"] === "Reconciled");
    assert.equal(lines.length, 2);
    const [unaryLine, streamLine] = lines as [LogFields, LogFields];
    assert.deepEqual(
      { ...streamLine, ts: 0, span_id: "" },
      { ...unaryLine, ts: 0, span_id: "" },
      "the same keys and values but for the time and the span",
    );
    assert.equal(streamLine["span_id"], stream.spanContext().spanId);
    assert.equal(streamLine["reconcileID"], "5f1c6c1e-8d1f-4b4e-9a55-3a9d0c7f1e2b");
  });

  test("a Reconcile without a trace from the host runs in a root span", async (t) => {
    const { reconcile, clusterCalls } = await setUp(t);
    await reconcile();

    const server = onlySpan(exporter.getFinishedSpans(), "polyop.v1alpha1.SidecarService/Reconcile");
    assert.equal(server.parentSpanContext, undefined);
    assert.notEqual(server.spanContext().traceId, HOST_TRACE);
    assert.ok(trace.isSpanContextValid(server.spanContext()));
    assert.equal(server.attributes["polyop.reconcile_id"], undefined);
    assert.equal(parseTraceparent(clusterCalls[0]!.traceparent).traceId, server.spanContext().traceId);
  });

  test("a denying Validate is a child span whose result is denied", async (t) => {
    const { validate } = await setUp(t);
    const resp = await validate(-1, HOST_CONTEXT);
    assert.match(resp.denied?.message ?? "", /size must not be negative/);

    const server = onlySpan(exporter.getFinishedSpans(), "polyop.v1alpha1.SidecarService/Validate");
    assert.equal(server.parentSpanContext?.spanId, HOST_SPAN);
    assert.equal(server.attributes["polyop.result"], "denied");
    assert.equal(server.attributes["polyop.kind"], "Widget");
  });
});

describe("with tracing off", () => {
  before(() => {
    for (const key of Object.keys(process.env).filter((k) => k.startsWith("OTEL_"))) {
      delete process.env[key];
    }
  });

  test("the sidecar sets up no tracer provider, records no span, and passes the host's trace on", async (t) => {
    assert.equal(tracingEnabled(), false);
    const { reconcile, clusterCalls, logs, seen } = await setUp(t);
    await reconcile(HOST_CONTEXT);

    const global = trace.getTracerProvider();
    assert.ok(global instanceof ProxyTracerProvider);
    assert.equal(global.getDelegate(), new ProxyTracerProvider().getDelegate(), "the global tracer provider is still the no-op one");
    assert.equal(seen.span?.isRecording(), false);
    // The host's span is the handler's parent still: its Cluster calls and log lines name it.
    assert.deepEqual(parseTraceparent(clusterCalls[0]!.traceparent), { traceId: HOST_TRACE, parentId: HOST_SPAN });
    const line = logs.find((l) => l["msg"] === "Reconciled");
    assert.deepEqual([line?.["trace_id"], line?.["span_id"]], [HOST_TRACE, HOST_SPAN]);
  });

  test("a call on ReconcileStream passes the host's trace in trace_context on, as a unary call's metadata", async (t) => {
    const { reconcileOnStream, clusterCalls, logs } = await setUp(t);
    await reconcileOnStream(HOST_CONTEXT);
    assert.deepEqual(parseTraceparent(clusterCalls[0]!.traceparent), { traceId: HOST_TRACE, parentId: HOST_SPAN });
    assert.equal(clusterCalls[0]!.baggage, HOST_CONTEXT.baggage);
    const line = logs.find((l) => l["msg"] === "Reconciled");
    assert.deepEqual([line?.["trace_id"], line?.["span_id"], line?.["reconcileID"]], [HOST_TRACE, HOST_SPAN, "5f1c6c1e-8d1f-4b4e-9a55-3a9d0c7f1e2b"]);
  });

  test("without a trace from the host, Cluster calls carry none and log lines name none", async (t) => {
    const { reconcile, clusterCalls, logs } = await setUp(t);
    await reconcile();
    assert.equal(clusterCalls[0]!.traceparent, "");
    const line = logs.find((l) => l["msg"] === "Reconciled");
    assert.ok(line);
    assert.equal("trace_id" in line, false);
  });
});

describe("tracingEnabled", () => {
  const cases: Record<string, [Record<string, string>, boolean | RegExp]> = {
    "if nothing is set, then tracing is off": [{}, false],
    "if an OTLP endpoint is set, then tracing is on": [{ OTEL_EXPORTER_OTLP_ENDPOINT: "http://collector:4317" }, true],
    "if a traces endpoint is set, then tracing is on": [{ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: "http://collector:4318/v1/traces" }, true],
    "if the exporter is otlp, then tracing is on": [{ OTEL_TRACES_EXPORTER: "otlp" }, true],
    "if the exporter is none, then tracing is off whatever the endpoint": [{ OTEL_TRACES_EXPORTER: "none", OTEL_EXPORTER_OTLP_ENDPOINT: "http://c:4317" }, false],
    "if the SDK is disabled, then tracing is off": [{ OTEL_SDK_DISABLED: "true", OTEL_TRACES_EXPORTER: "otlp" }, false],
    "if another exporter is named, then it is an error naming the remedy": [{ OTEL_TRACES_EXPORTER: "zipkin" }, /otlp only; set it to otlp or none/],
  };
  for (const [name, [env, want]] of Object.entries(cases)) {
    test(name, () => {
      if (want instanceof RegExp) {
        assert.throws(() => tracingEnabled(env), want);
      } else {
        assert.equal(tracingEnabled(env), want);
      }
    });
  }
});
