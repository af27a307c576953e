import {
  context,
  defaultTextMapGetter,
  propagation,
  ProxyTracerProvider,
  ROOT_CONTEXT,
  SpanKind,
  SpanStatusCode,
  trace,
  type Attributes,
  type Context,
  type Span,
  type TextMapGetter,
  type TextMapSetter,
} from "@opentelemetry/api";
import { ConnectError } from "@connectrpc/connect";
import { CompositePropagator, W3CBaggagePropagator, W3CTraceContextPropagator } from "@opentelemetry/core";

import { SDK_NAME, SDK_VERSION } from "./version.js";
import type { LogFields, Logger } from "./log.js";

// OpenTelemetry tracing of the calls a sidecar serves and makes. The SDK
// propagates the trace itself, with OpenTelemetry's propagation API, rather
// than through @opentelemetry/instrumentation-grpc: that instrumentation
// patches @grpc/grpc-js through require hooks, which do not see a module
// imported as an ES module (this SDK and its users' sidecars are ES modules)
// unless the process starts with a loader flag, and it would not see the
// Cluster service client at all, which speaks gRPC through Connect.

/** The span attributes of polyop's spans, the same in the host and in every SDK. */
export const SpanAttributes = {
  /** The controller's name. */
  controller: "polyop.controller",
  /** The kind of the object (Kind, without group and version). */
  kind: "polyop.kind",
  /** The object's namespace ("" for a cluster-scoped one). */
  namespace: "polyop.namespace",
  /** The object's name. */
  name: "polyop.name",
  /** controller-runtime's ID of one reconcile, the reconcileID of the host's logs. */
  reconcileId: "polyop.reconcile_id",
  /** How many times in a row the object's reconcile failed before this one. */
  retries: "polyop.retries",
  /** How the call ended: one of the CallResult values. */
  result: "polyop.result",
} as const;

/** The values of the polyop.result attribute, as the host's. */
export type CallResult = "success" | "requeue" | "error" | "terminal_error" | "denied";

/**
 * The W3C baggage member in which the host sends the reconcile's ID on every
 * Reconcile and Finalize call.
 */
export const BAGGAGE_RECONCILE_ID = "polyop.reconcile_id";

/** W3C trace context and baggage: what travels in the gRPC metadata of every call between host and sidecar. */
const propagator = new CompositePropagator({ propagators: [new W3CTraceContextPropagator(), new W3CBaggagePropagator()] });

/** Reads a propagated header from gRPC metadata (grpc-js's Metadata, or anything with a get returning values). */
const metadataGetter: TextMapGetter<{ get(key: string): unknown[]; getMap(): Record<string, unknown> }> = {
  keys: (md) => Object.keys(md.getMap()),
  get: (md, key) => {
    const values = md.get(key).map(String);
    return values.length === 0 ? undefined : values.length === 1 ? values[0] : values;
  },
};

/** Writes a propagated header into the Headers of a Connect request. */
const headersSetter: TextMapSetter<Headers> = { set: (headers, key, value) => headers.set(key, value) };

/** The tracer of the SDK's spans, from the global tracer provider (a no-op one when tracing is off). */
function tracer() {
  return trace.getTracer(SDK_NAME, SDK_VERSION);
}

/**
 * The trace context the host sent in a call's metadata (traceparent,
 * tracestate, baggage), or the root context when it sent none.
 */
export function extractContext(metadata: { get(key: string): unknown[]; getMap(): Record<string, unknown> }): Context {
  if (metadata.get("traceparent").length === 0 && metadata.get("baggage").length === 0) {
    return ROOT_CONTEXT;
  }
  return propagator.extract(ROOT_CONTEXT, metadata, metadataGetter);
}

/**
 * The trace context the host sent with a call on ReconcileStream, in its
 * trace_context map (traceparent, tracestate, baggage: the keys of the
 * metadata of a unary call), or the root context when it sent none.
 */
export function extractMapContext(carrier: Record<string, string>): Context {
  if (carrier["traceparent"] === undefined && carrier["baggage"] === undefined) {
    return ROOT_CONTEXT;
  }
  return propagator.extract(ROOT_CONTEXT, carrier, defaultTextMapGetter);
}

/** The reconcile ID in a context's baggage, or "". */
export function reconcileIdOf(ctx: Context): string {
  return propagation.getBaggage(ctx)?.getEntry(BAGGAGE_RECONCILE_ID)?.value ?? "";
}

/**
 * The log fields of a span: trace_id and span_id in hex, or none when the span
 * carries no valid trace (tracing off and no trace from the host).
 */
export function logFieldsOf(span: Span): LogFields {
  const sc = span.spanContext();
  return trace.isSpanContextValid(sc) ? { trace_id: sc.traceId, span_id: sc.spanId } : {};
}

/** A call the sidecar serves, as the handlers see it. */
export interface TracedCall {
  /** The trace context the host sent; the active context when absent (the test harness's calls). */
  readonly traceContext?: Context;
}

/** What a handler running in a server span gets. */
export interface ServerSpan {
  readonly span: Span;
  /** The context holding the span (and the host's baggage). */
  readonly context: Context;
  /** The reconcile ID the host sent, or "". */
  readonly reconcileId: string;
  /**
   * The log fields of the call: reconcileID when the host sent one, trace_id
   * and span_id of the span when it has a valid trace.
   */
  readonly logFields: LogFields;
}

/**
 * Runs fn in a server span named after the SidecarService method, child of
 * the host's span, and active in the OpenTelemetry context (with an
 * AsyncLocalStorage context manager registered, across awaits too), with the
 * reconcile ID the host sent as polyop.reconcile_id. A thrown error is
 * recorded on the span and sets its status to ERROR; result, when given, names
 * the polyop.result of what fn returned.
 */
export function inServerSpan<T>(
  call: TracedCall,
  method: string,
  attributes: Attributes,
  fn: (s: ServerSpan) => Promise<T>,
  result?: (value: T, span: Span) => CallResult,
): Promise<T> {
  const parent = call.traceContext ?? context.active();
  const reconcileId = reconcileIdOf(parent);
  const span = tracer().startSpan(
    `polyop.v1alpha1.SidecarService/${method}`,
    {
      kind: SpanKind.SERVER,
      attributes: {
        "rpc.system": "grpc",
        "rpc.service": "polyop.v1alpha1.SidecarService",
        "rpc.method": method,
        ...attributes,
        ...(reconcileId ? { [SpanAttributes.reconcileId]: reconcileId } : {}),
      },
    },
    parent,
  );
  const ctx = trace.setSpan(parent, span);
  const logFields = { ...(reconcileId ? { reconcileID: reconcileId } : {}), ...logFieldsOf(span) };
  return context.with(ctx, async () => {
    try {
      const value = await fn({ span, context: ctx, reconcileId, logFields });
      if (result) {
        span.setAttribute(SpanAttributes.result, result(value, span));
      }
      return value;
    } catch (err) {
      failSpan(span, err);
      // The code the call fails with (serve.ts answers an error other than a ConnectError as UNKNOWN).
      span.setAttribute("rpc.grpc.status_code", err instanceof ConnectError ? err.code : 2);
      span.setAttribute(SpanAttributes.result, "error");
      throw err;
    } finally {
      span.end();
    }
  });
}

/** Records err on span and marks the span failed. */
export function failSpan(span: Span, err: unknown): void {
  span.recordException(err instanceof Error ? err : String(err));
  span.setStatus({ code: SpanStatusCode.ERROR, message: err instanceof Error ? err.message : String(err) });
}

/**
 * Starts the client span of a Cluster service call, child of the active span
 * or, when no span is active (no context manager registered), of fallback,
 * the context of the handler the call is made from; and writes its context
 * into the request's headers (traceparent, tracestate, baggage) so that the
 * host continues the trace.
 */
export function startClientSpan(service: string, method: string, headers: Headers, fallback: Context | undefined): Span {
  const active = context.active();
  const parent = trace.getSpan(active) || !fallback ? active : fallback;
  const span = tracer().startSpan(
    `${service}/${method}`,
    { kind: SpanKind.CLIENT, attributes: { "rpc.system": "grpc", "rpc.service": service, "rpc.method": method } },
    parent,
  );
  propagator.inject(trace.setSpan(parent, span), headers, headersSetter);
  return span;
}

/** The environment variables tracing reads. */
type Env = Record<string, string | undefined>;

/**
 * Whether the OTEL_* environment variables turn tracing on: OTEL_TRACES_EXPORTER
 * is otlp, or, with OTEL_TRACES_EXPORTER unset, OTEL_EXPORTER_OTLP_ENDPOINT or
 * OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is set; never when OTEL_SDK_DISABLED is
 * true or OTEL_TRACES_EXPORTER is none. Throws for another exporter: polyop
 * exports traces with OTLP only.
 */
export function tracingEnabled(env: Env = process.env): boolean {
  if (env["OTEL_SDK_DISABLED"]?.trim().toLowerCase() === "true") {
    return false;
  }
  const exporter = env["OTEL_TRACES_EXPORTER"]?.trim() ?? "";
  switch (exporter) {
    case "":
      return Boolean(env["OTEL_EXPORTER_OTLP_ENDPOINT"]?.trim() || env["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"]?.trim());
    case "none":
      return false;
    case "otlp":
      return true;
    default:
      throw new Error(`polyop: OTEL_TRACES_EXPORTER=${exporter}: polyop exports traces with otlp only; set it to otlp or none`);
  }
}

/** The OTLP protocol the environment names: grpc (the default) or http/protobuf. */
function otlpProtocol(env: Env): "grpc" | "http/protobuf" {
  let variable = "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL";
  let protocol = env[variable]?.trim();
  if (!protocol) {
    variable = "OTEL_EXPORTER_OTLP_PROTOCOL";
    protocol = env[variable]?.trim();
  }
  if (!protocol || protocol === "grpc" || protocol === "http/protobuf") {
    return protocol === "http/protobuf" ? "http/protobuf" : "grpc";
  }
  throw new Error(`polyop: ${variable}=${protocol}: polyop exports traces over grpc or http/protobuf; set it to one of them`);
}

/** Tracing as a serving sidecar set it up. */
export interface Tracing {
  /** Flushes the spans not yet exported and unregisters what the sidecar registered; nothing when it registered nothing. */
  shutdown(): Promise<void>;
}

/**
 * Sets up tracing for a sidecar about to serve, from the OTEL_* environment
 * variables. When a tracer provider is already registered globally (the
 * application's own), the sidecar's spans go to it and nothing is set up.
 * Otherwise, when the environment turns tracing on (see tracingEnabled), it
 * registers globally a tracer provider exporting with OTLP in batches (its
 * sampler and resource follow OTEL_TRACES_SAMPLER, OTEL_TRACES_SAMPLER_ARG,
 * OTEL_SERVICE_NAME, whose default is the sidecar's name, and
 * OTEL_RESOURCE_ATTRIBUTES; the exporter reads the other
 * OTEL_EXPORTER_OTLP_* variables), an AsyncLocalStorage context manager,
 * so that the active span follows a handler across its awaits, and the W3C
 * trace context and baggage propagators, unless ones are registered. The
 * SDK's modules are loaded only then: tracing off costs nothing at start.
 */
export async function setUpTracing(serviceName: string, log: Logger, env: Env = process.env): Promise<Tracing> {
  const none: Tracing = { shutdown: async () => {} };
  if (providerRegistered()) {
    log.info("Tracing calls with the application's tracer provider");
    return none;
  }
  if (!tracingEnabled(env)) {
    return none;
  }
  const protocol = otlpProtocol(env);
  const [{ BasicTracerProvider, BatchSpanProcessor }, resources, { AsyncLocalStorageContextManager }, exporterModule] = await Promise.all([
    import("@opentelemetry/sdk-trace-base"),
    import("@opentelemetry/resources"),
    import("@opentelemetry/context-async-hooks"),
    protocol === "grpc" ? import("@opentelemetry/exporter-trace-otlp-grpc") : import("@opentelemetry/exporter-trace-otlp-proto"),
  ]);
  // Later resources win: OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES over the sidecar's name.
  const resource = resources
    .defaultResource()
    .merge(resources.resourceFromAttributes({ "service.name": serviceName }))
    .merge(resources.detectResources({ detectors: [resources.envDetector] }));
  const provider = new BasicTracerProvider({
    resource,
    spanProcessors: [new BatchSpanProcessor(new exporterModule.OTLPTraceExporter())],
  });
  if (!trace.setGlobalTracerProvider(provider)) {
    // Registered meanwhile by someone else: theirs wins.
    await provider.shutdown();
    return none;
  }
  const contextManager = new AsyncLocalStorageContextManager().enable();
  const ownContextManager = context.setGlobalContextManager(contextManager);
  if (!ownContextManager) {
    contextManager.disable();
  }
  const ownPropagator = propagation.setGlobalPropagator(propagator);
  const endpoint = env["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"]?.trim() || env["OTEL_EXPORTER_OTLP_ENDPOINT"]?.trim() || "the exporter's default";
  log.info("Tracing calls: exporting spans with OTLP", { protocol, endpoint });
  return {
    shutdown: async () => {
      try {
        await provider.shutdown();
      } catch (err) {
        log.error("Flushing the spans not yet exported", { error: err });
      }
      trace.disable();
      if (ownContextManager) {
        context.disable();
      }
      if (ownPropagator) {
        propagation.disable();
      }
    },
  };
}

/**
 * Whether a tracer provider is registered globally: the global proxy
 * delegates to another provider than the no-op one a fresh proxy has.
 */
function providerRegistered(): boolean {
  const global = trace.getTracerProvider();
  return !(global instanceof ProxyTracerProvider) || global.getDelegate() !== new ProxyTracerProvider().getDelegate();
}
