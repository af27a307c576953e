import { chmod, lstat, rm } from "node:fs/promises";

import { create, fromBinary, toBinary, type DescMessage, type DescService, type MessageShape } from "@bufbuild/protobuf";
import * as grpc from "@grpc/grpc-js";

import { DEFAULT_ADDRESS, parseAddress, prepareSocket } from "./address.js";
import { callFailure, callSignal, runCall, timeLeft, type HandlerCall, type UnaryHandler } from "./call.js";
import { Health } from "./gen/grpc/health/v1/health_pb.js";
import type { DescribeResponse } from "./gen/polyop/v1alpha1/describe_pb.js";
import { ReconcileRequestSchema, ReconcileStreamRequestSchema } from "./gen/polyop/v1alpha1/reconcile_pb.js";
import { SidecarService } from "./gen/polyop/v1alpha1/sidecar_pb.js";
import { HealthService, ServingStatus } from "./health.js";
import type { Logger } from "./log.js";
import { addReflection } from "./reflection.js";
import type { SidecarServiceImpl } from "./service.js";
import { reconcileStreams } from "./stream.js";
import { extractContext, setUpTracing, type Tracing } from "./tracing.js";
import { decodeReconcileRequest, decodeReconcileStreamRequest } from "./wire.js";

type Endpoint = ReturnType<typeof parseAddress>;

/**
 * The mode of the unix socket a sidecar serves on: read and write for its
 * owner and group, nothing for others.
 */
export const SOCKET_MODE = 0o660;

/**
 * How a sidecar serves: one options object for Sidecar.serve and
 * Sidecar.start. Every field is optional.
 */
export interface ServeOptions {
  /**
   * Where to listen: "unix:///path/to/socket" (or "unix:path"), or
   * "tcp://host:port" (port 0: one the system chooses). Defaults to
   * DEFAULT_ADDRESS, the host's default --sidecar-address.
   */
  address?: string;
  /** Stops the sidecar gracefully when aborted. Defaults to none: it serves until stopped. */
  signal?: AbortSignal;
  /**
   * Serve gRPC server reflection of SidecarService and Health, so that
   * grpcurl lists and calls the sidecar without the proto files. Defaults to
   * on a unix socket, off on TCP.
   */
  reflection?: boolean;
  /**
   * Serve SidecarService.ReconcileStream and say so in Describe, so that the
   * host sends its Reconcile and Finalize calls as messages of one stream per
   * worker rather than as a gRPC call each: the same calls, the same handlers
   * and answers, at a lower cost per call. false serves the unary calls only
   * (the host then makes them). Defaults to true.
   */
  reconcileStream?: boolean;
  /** How long a stop waits for the calls in flight, in milliseconds. Defaults to 30 seconds. */
  gracefulShutdownTimeoutMs?: number;
}

/** The ServeOptions with their defaults, as serve uses them. */
export type ResolvedServeOptions = Required<Omit<ServeOptions, "signal" | "reflection">> & Pick<ServeOptions, "signal" | "reflection">;

/** Fills in the defaults of options. */
export function resolveServeOptions(options: ServeOptions): ResolvedServeOptions {
  return {
    address: options.address ?? DEFAULT_ADDRESS,
    reconcileStream: options.reconcileStream ?? true,
    gracefulShutdownTimeoutMs: options.gracefulShutdownTimeoutMs ?? 30_000,
    ...(options.signal ? { signal: options.signal } : {}),
    ...(options.reflection !== undefined ? { reflection: options.reflection } : {}),
  };
}

/** A sidecar serving in the background: what Sidecar.start returns. */
export interface RunningSidecar {
  /** The address served on; for "tcp://host:0", with the port chosen. */
  readonly address: string;
  /** Resolves once the sidecar has stopped. */
  readonly closed: Promise<void>;
  /**
   * Stops gracefully: health reports NOT_SERVING and its watchers are let go,
   * new calls are refused, calls in flight finish (at most
   * gracefulShutdownTimeoutMs, then their connections close), and each open
   * ReconcileStream ends with UNAVAILABLE once its call in flight, if any,
   * is answered.
   */
  stop(): Promise<void>;
}

/** @deprecated Use RunningSidecar, what Sidecar.start returns. */
export type RunningServer = RunningSidecar;

/** What serve needs to know of the sidecar it serves, beside its service. */
export interface Served {
  /** The sidecar's name, for the tracing's service name. */
  readonly name: string;
  readonly log: Logger;
  /** The largest gRPC message received or sent, in bytes. */
  readonly maxMessageSize: number;
  /** The sidecar's description, logged once it serves. */
  describe(): DescribeResponse;
}

/**
 * The handlers of a service, by method: unary and server-streaming ones take
 * a request and its call (see HandlerCall); a bidirectional one is grpc-js's
 * own handler.
 */
type Handlers = Record<string, UnaryHandler | ((req: never, call: HandlerCall) => AsyncIterable<unknown>) | grpc.handleBidiStreamingCall<never, never>>;

/**
 * Serves a sidecar's SidecarService and gRPC's health service with
 * @grpc/grpc-js, over HTTP/2 cleartext on a unix socket or TCP, as the host's
 * gRPC client expects, and gRPC server reflection of both where the sidecar
 * says so. (The handlers are protocol-neutral: they take a request message,
 * an AbortSignal and the caller's trace context and throw ConnectErrors,
 * whose codes are gRPC's.) Tracing is set up from the OTEL_* environment
 * variables first, and shut down, its spans flushed, once stopped.
 */
export async function serve(service: SidecarServiceImpl, sidecar: Served, options: ResolvedServeOptions): Promise<RunningSidecar> {
  const endpoint = parseAddress(options.address);
  if ("path" in endpoint) {
    await prepareSocket(endpoint.path);
  }
  const tracing = await setUpTracing(sidecar.name, sidecar.log);
  try {
    return await start(service, sidecar, options, endpoint, tracing);
  } catch (err) {
    await tracing.shutdown();
    throw err;
  }
}

async function start(service: SidecarServiceImpl, sidecar: Served, options: ResolvedServeOptions, endpoint: Endpoint, tracing: Tracing): Promise<RunningSidecar> {
  const address = options.address;
  const health = new HealthService();
  const server = new grpc.Server({
    "grpc.max_receive_message_length": sidecar.maxMessageSize,
    "grpc.max_send_message_length": sidecar.maxMessageSize,
    // "grpc.enable_channelz": 0 would save channelz's per-call bookkeeping,
    // but grpc-js 1.14 then no longer tracks sessions, and forceShutdown (the
    // graceful shutdown's timeout) leaves their calls running.
  });
  // The stream's calls go to the unary Reconcile's and Finalize's handlers.
  const streams = reconcileStreams(service);
  addService(server, SidecarService, { ...service, ...(options.reconcileStream ? { reconcileStream: streams.handler } : {}) });
  addService(server, Health, health.service);
  const reflection = options.reflection ?? "path" in endpoint;
  if (reflection) {
    addReflection(server, [SidecarService, Health]);
  }

  const target =
    "path" in endpoint ? `unix:${endpoint.path}` : `${endpoint.host.includes(":") ? `[${endpoint.host}]` : endpoint.host || "0.0.0.0"}:${endpoint.port}`;
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync(target, grpc.ServerCredentials.createInsecure(), (err, port) => (err ? reject(new Error(`polyop: listening on ${address}: ${err.message}`)) : resolve(port))),
  );
  if ("path" in endpoint) {
    // Owner and group only, as the host makes its own socket: the host's
    // container needs the same user, or a group the pod's fsGroup gives both.
    await chmod(endpoint.path, SOCKET_MODE);
  }
  const served = "path" in endpoint ? `unix://${endpoint.path}` : `tcp://${target.slice(0, target.lastIndexOf(":"))}:${port}`;

  health.set("", ServingStatus.SERVING);
  health.set(SidecarService.typeName, ServingStatus.SERVING);
  const description = sidecar.describe();
  sidecar.log.info("Serving", {
    address: served,
    protocolVersion: description.protocolVersion,
    controllers: description.controllers.map((c) => c.name),
    webhooks: description.webhooks.map((w) => w.kind?.kind),
    conversions: description.conversions.map((c) => c.kind),
    reflection,
  });

  let stopping: Promise<void> | undefined;
  let markClosed: () => void;
  const closed = new Promise<void>((resolve) => (markClosed = resolve));
  const stop = () => {
    stopping ??= (async () => {
      sidecar.log.info("Stopping: waiting for the calls in flight", { timeoutMs: options.gracefulShutdownTimeoutMs });
      health.shutdown();
      // The host keeps its streams open between calls: end them, each once its call in flight is answered.
      streams.stop();
      const timer = setTimeout(() => {
        sidecar.log.info("Calls still in flight after the graceful shutdown timeout; closing their connections");
        server.forceShutdown();
      }, options.gracefulShutdownTimeoutMs);
      await new Promise<void>((resolve) => server.tryShutdown(() => resolve()));
      clearTimeout(timer);
      if ("path" in endpoint) {
        // Leave no socket behind for the next sidecar to find stale.
        const isSocket = await lstat(endpoint.path).then((s) => s.isSocket(), () => false);
        if (isSocket) {
          await rm(endpoint.path, { force: true });
        }
      }
      await tracing.shutdown();
      sidecar.log.info("Stopped");
      markClosed();
    })();
    return stopping;
  };
  return { address: served, closed, stop };
}

/**
 * Registers handlers for the methods of a protobuf-es service on a grpc-js
 * server. Each unary call runs through runCall (the path the calls of
 * ReconcileStream take too); each server-streaming call gets a signal that
 * aborts when the client cancels or the call's deadline passes. A
 * bidirectional method's handler is grpc-js's own.
 */
function addService(server: grpc.Server, service: DescService, handlers: Handlers) {
  const definition: Record<string, grpc.MethodDefinition<unknown, unknown>> = {};
  const implementation: grpc.UntypedServiceImplementation = {};
  for (const method of service.methods) {
    const impl = handlers[method.localName];
    if (!impl || method.methodKind === "client_streaming") {
      continue;
    }
    const kind = method.methodKind;
    definition[method.localName] = {
      path: `/${service.typeName}/${method.name}`,
      requestStream: kind === "bidi_streaming",
      responseStream: kind !== "unary",
      requestSerialize: serialize(method.input),
      requestDeserialize: deserializer(method.input),
      responseSerialize: serialize(method.output),
      responseDeserialize: (b: Buffer) => fromBinary(method.output, b),
      originalName: method.localName,
    };
    if (kind === "bidi_streaming") {
      implementation[method.localName] = impl as grpc.handleBidiStreamingCall<unknown, unknown>;
    } else if (kind === "server_streaming") {
      const stream = impl as (req: never, call: HandlerCall) => AsyncIterable<unknown>;
      // grpc-js ignores what a handler returns; this one catches every error itself.
      // eslint-disable-next-line @typescript-eslint/no-misused-promises
      implementation[method.localName] = async (call: grpc.ServerWritableStream<unknown, unknown>) => {
        const { signal, done } = callSignal(call, timeLeft(call.getDeadline()));
        try {
          for await (const message of stream(call.request as never, { signal, traceContext: extractContext(call.metadata) })) {
            call.write(message);
          }
          call.end();
        } catch (err) {
          call.emit("error", callFailure(err));
        } finally {
          done();
        }
      };
    } else {
      const unary = impl as UnaryHandler;
      implementation[method.localName] = (call: grpc.ServerUnaryCall<unknown, unknown>, callback: grpc.sendUnaryData<unknown>) =>
        runCall(unary, call.request, call, timeLeft(call.getDeadline()), extractContext(call.metadata), callback);
    }
  }
  server.addService(definition, implementation);
}

/** Decodes a request of desc: ReconcileRequest and ReconcileStreamRequest with the decoders of wire.ts, others with fromBinary. */
function deserializer(desc: DescMessage): (b: Buffer) => unknown {
  if (desc === ReconcileRequestSchema) {
    return decodeReconcileRequest;
  }
  if (desc === ReconcileStreamRequestSchema) {
    return decodeReconcileStreamRequest;
  }
  return (b: Buffer) => fromBinary(desc, b);
}

/**
 * Encodes a message, or the plain object a handler answered with, as desc:
 * a Buffer over toBinary's bytes, not a copy of them (grpc-js copies them once
 * more, behind the message's length prefix).
 */
function serialize<D extends DescMessage>(desc: D) {
  return (value: unknown) => {
    const message = value as MessageShape<D>;
    const bytes = toBinary(desc, "$typeName" in message ? message : create(desc, message));
    return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  };
}
