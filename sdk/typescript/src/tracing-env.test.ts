// Tracing set up by the sidecar from the OTEL_* environment variables: the
// spans of a call reach an OTLP collector served in this process, over gRPC
// (the default) and over HTTP with protobuf. A file of its own: the tracer
// provider the sidecar registers is global to the process.
import assert from "node:assert/strict";
import { mkdtemp, rm } from "node:fs/promises";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { beforeEach, describe, test, type TestContext } from "node:test";

import { BinaryReader, WireType } from "@bufbuild/protobuf/wire";
import * as grpc from "@grpc/grpc-js";
import { trace } from "@opentelemetry/api";

import { ClusterService } from "./gen/polyop/v1alpha1/cluster_pb.js";
import { ReconcileRequestSchema, ReconcileResponseSchema } from "./gen/polyop/v1alpha1/reconcile_pb.js";
import { SidecarService } from "./gen/polyop/v1alpha1/sidecar_pb.js";
import { GrpcClient, serveUnary } from "./grpcjs.testutil.js";
import { discardLogger } from "./log.js";
import type { KubeObject } from "./objects.js";
import { Sidecar } from "./sidecar.js";

type Widget = KubeObject<{ size: number }>;
const widgets = { apiVersion: "example.com/v1", kind: "Widget" };
const configMaps = { apiVersion: "v1", kind: "ConfigMap" };
const json = (v: unknown) => new TextEncoder().encode(JSON.stringify(v));

const HOST_TRACE = "0af7651916cd43dd8448eb211c80319c";
const HOST_SPAN = "b7ad6b7169203331";

/** A span as an OTLP collector received it, with its resource's service.name. */
interface ReceivedSpan {
  service: string;
  traceId: string;
  spanId: string;
  parentSpanId: string;
  name: string;
}

/** The length-delimited fields of a protobuf message, as [field number, bytes]. */
function* fields(data: Uint8Array): Generator<[number, Uint8Array]> {
  const reader = new BinaryReader(data);
  while (reader.pos < reader.len) {
    const [no, type] = reader.tag();
    if (type === WireType.LengthDelimited) {
      yield [no, reader.bytes()];
    } else {
      reader.skip(type, no);
    }
  }
}

const hex = (b: Uint8Array) => Buffer.from(b).toString("hex");
const text = (b: Uint8Array) => new TextDecoder().decode(b);

/**
 * The spans of an ExportTraceServiceRequest (opentelemetry-proto's
 * collector/trace/v1), decoded as far as the test needs: resource_spans (1)
 * of resource (1, its attributes 1: key 1, value 2 with string_value 1) and
 * scope_spans (2) of spans (2: trace_id 1, span_id 2, parent_span_id 4, name 5).
 */
function decodeExport(data: Uint8Array): ReceivedSpan[] {
  const spans: ReceivedSpan[] = [];
  for (const [no, resourceSpans] of fields(data)) {
    if (no !== 1) {
      continue;
    }
    let service = "";
    const found: Omit<ReceivedSpan, "service">[] = [];
    for (const [rno, value] of fields(resourceSpans)) {
      if (rno === 1) {
        for (const [ano, attribute] of fields(value)) {
          if (ano !== 1) {
            continue;
          }
          const kv = new Map(fields(attribute));
          if (text(kv.get(1) ?? new Uint8Array()) === "service.name") {
            service = text(new Map(fields(kv.get(2) ?? new Uint8Array())).get(1) ?? new Uint8Array());
          }
        }
      } else if (rno === 2) {
        for (const [sno, span] of fields(value)) {
          if (sno !== 2) {
            continue;
          }
          const f = new Map(fields(span));
          const get = (n: number) => f.get(n) ?? new Uint8Array();
          found.push({ traceId: hex(get(1)), spanId: hex(get(2)), parentSpanId: hex(get(4)), name: text(get(5)) });
        }
      }
    }
    spans.push(...found.map((s) => ({ ...s, service })));
  }
  return spans;
}

/** An OTLP collector's TraceService on a loopback port, served by @grpc/grpc-js. */
async function grpcCollector(t: TestContext): Promise<{ endpoint: string; spans: ReceivedSpan[] }> {
  const spans: ReceivedSpan[] = [];
  const server = new grpc.Server();
  server.addService(
    {
      Export: {
        path: "/opentelemetry.proto.collector.trace.v1.TraceService/Export",
        requestStream: false,
        responseStream: false,
        requestSerialize: (b: Buffer) => b,
        requestDeserialize: (b: Buffer) => b,
        responseSerialize: () => Buffer.alloc(0), // an empty ExportTraceServiceResponse: full success
        responseDeserialize: (b: Buffer) => b,
      },
    },
    {
      Export: (call: grpc.ServerUnaryCall<Buffer, Buffer>, callback: grpc.sendUnaryData<Buffer>) => {
        spans.push(...decodeExport(call.request));
        callback(null, Buffer.alloc(0));
      },
    },
  );
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync("127.0.0.1:0", grpc.ServerCredentials.createInsecure(), (err, p) => (err ? reject(err) : resolve(p))),
  );
  t.after(() => server.forceShutdown());
  return { endpoint: `http://127.0.0.1:${port}`, spans };
}

/** An OTLP collector's HTTP endpoint, /v1/traces taking protobuf, on a loopback port. */
async function httpCollector(t: TestContext): Promise<{ endpoint: string; spans: ReceivedSpan[]; contentTypes: string[] }> {
  const spans: ReceivedSpan[] = [];
  const contentTypes: string[] = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      if (req.url === "/v1/traces") {
        contentTypes.push(req.headers["content-type"] ?? "");
        spans.push(...decodeExport(Buffer.concat(chunks)));
      }
      res.writeHead(req.url === "/v1/traces" ? 200 : 404, { "content-type": "application/x-protobuf" }).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  t.after(() => new Promise<void>((resolve) => server.close(() => resolve())));
  return { endpoint: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, spans, contentTypes };
}

/** Waits until check passes, or fails with its last error after timeoutMs. */
async function eventually(check: () => void, timeoutMs = 20_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      check();
      return;
    } catch (err) {
      if (Date.now() > deadline) {
        throw err;
      }
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  }
}

/**
 * Serves a sidecar, whose reconciler reads through a Cluster service, with
 * env set; makes one Reconcile carrying the host's trace; stops it.
 */
async function reconcileOnce(t: TestContext, env: Record<string, string>) {
  const dir = await mkdtemp(join(tmpdir(), "po-"));
  t.after(() => rm(dir, { recursive: true, force: true }));
  const cluster = await serveUnary(`unix:${join(dir, "cluster.sock")}`, ClusterService, {
    get: () => ({ object: json({ ...configMaps, metadata: { namespace: "default", name: "settings" } }) }),
  });
  t.after(() => cluster.stop());
  Object.assign(process.env, env);
  t.after(() => Object.keys(env).forEach((key) => delete process.env[key]));

  const sidecar = new Sidecar({ name: "widget-operator", logger: discardLogger, clusterAddress: `unix://${join(dir, "cluster.sock")}` }).reconciler<Widget>(
    { for: widgets },
    async (_w, ctx) => {
      await ctx.cluster.get(configMaps, { namespace: "default", name: "settings" });
    },
  );
  const server = await sidecar.start({ address: `unix://${join(dir, "sidecar.sock")}` });
  const client = new GrpcClient(`unix://${join(dir, "sidecar.sock")}`);
  try {
    await client.unary(
      SidecarService,
      "Reconcile",
      ReconcileRequestSchema,
      ReconcileResponseSchema,
      {
        controller: "widget",
        kind: { group: "example.com", version: "v1", kind: "Widget" },
        key: { namespace: "default", name: "w" },
        object: json({ ...widgets, metadata: { namespace: "default", name: "w" }, spec: { size: 1 } }),
      },
      5000,
      { traceparent: `00-${HOST_TRACE}-${HOST_SPAN}-01` },
    );
  } finally {
    client.close();
    await server.stop(); // flushes the spans not yet exported
  }
}

/** Checks that the collector received the Reconcile's server span and the Cluster call's client span, in the host's trace. */
function checkSpans(spans: ReceivedSpan[]) {
  const reconcile = spans.find((s) => s.name === "polyop.v1alpha1.SidecarService/Reconcile");
  const get = spans.find((s) => s.name === "polyop.v1alpha1.ClusterService/Get");
  assert.ok(reconcile && get, `spans received: ${JSON.stringify(spans)}`);
  assert.deepEqual(
    { traceId: reconcile.traceId, parentSpanId: reconcile.parentSpanId, service: reconcile.service },
    { traceId: HOST_TRACE, parentSpanId: HOST_SPAN, service: "widget-operator" },
  );
  assert.deepEqual({ traceId: get.traceId, parentSpanId: get.parentSpanId }, { traceId: HOST_TRACE, parentSpanId: reconcile.spanId });
}

describe("tracing configured by OTEL_* environment variables", () => {
  beforeEach(() => {
    for (const key of Object.keys(process.env).filter((k) => k.startsWith("OTEL_"))) {
      delete process.env[key];
    }
  });

  test("exports the spans of a call with OTLP over gRPC to OTEL_EXPORTER_OTLP_ENDPOINT", async (t) => {
    const collector = await grpcCollector(t);
    await reconcileOnce(t, { OTEL_EXPORTER_OTLP_ENDPOINT: collector.endpoint });
    await eventually(() => checkSpans(collector.spans));
    // Stopping unregistered the sidecar's provider.
    assert.equal(trace.getTracerProvider().getTracer("x").startSpan("x").isRecording(), false);
  });

  test("exports with OTLP over HTTP with protobuf when OTEL_EXPORTER_OTLP_PROTOCOL says so, named by OTEL_SERVICE_NAME", async (t) => {
    const collector = await httpCollector(t);
    await reconcileOnce(t, {
      OTEL_EXPORTER_OTLP_ENDPOINT: collector.endpoint,
      OTEL_EXPORTER_OTLP_PROTOCOL: "http/protobuf",
      OTEL_SERVICE_NAME: "widgets-in-staging",
    });
    await eventually(() => {
      assert.ok(collector.spans.some((s) => s.name === "polyop.v1alpha1.SidecarService/Reconcile"), JSON.stringify(collector.spans));
    });
    assert.deepEqual(new Set(collector.contentTypes), new Set(["application/x-protobuf"]));
    assert.deepEqual(new Set(collector.spans.map((s) => s.service)), new Set(["widgets-in-staging"]));
  });

  test("refuses to serve with an OTLP protocol it cannot export with, naming the ones it can", async (t) => {
    const dir = await mkdtemp(join(tmpdir(), "po-"));
    t.after(() => rm(dir, { recursive: true, force: true }));
    process.env["OTEL_EXPORTER_OTLP_ENDPOINT"] = "http://127.0.0.1:4318";
    process.env["OTEL_EXPORTER_OTLP_PROTOCOL"] = "http/json";
    const sidecar = new Sidecar({ name: "widget-operator", logger: discardLogger }).reconciler({ for: widgets }, () => {});
    await assert.rejects(sidecar.start({ address: `unix://${join(dir, "sidecar.sock")}` }), /OTEL_EXPORTER_OTLP_PROTOCOL=http\/json: .* grpc or http\/protobuf/);
  });
});
