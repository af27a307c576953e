import { chmod, lstat, rm } from "node:fs/promises";

import { create, fromBinary, toBinary, type DescMessage, type DescService, type MessageShape } from "@bufbuild/protobuf";
import { ConnectError } from "@connectrpc/connect";
import * as grpc from "@grpc/grpc-js";
import type { Context } from "@opentelemetry/api";

import { parseAddress, prepareSocket } from "./address.js";

type Endpoint = ReturnType<typeof parseAddress>;
import { Health } from "./gen/grpc/health/v1/health_pb.js";
import { ReconcileRequestSchema } from "./gen/polyop/v1alpha1/reconcile_pb.js";
import { SidecarService } from "./gen/polyop/v1alpha1/sidecar_pb.js";
import { HealthService, ServingStatus } from "./health.js";
import { addReflection } from "./reflection.js";
import type { Sidecar } from "./sidecar.js";
import { extractContext, setUpTracing, type Tracing } from "./tracing.js";
import { decodeReconcileRequest } from "./wire.js";

/**
 * The mode of the unix socket a sidecar serves on: read and write for its
 * owner and group, nothing for others.
 */
export const SOCKET_MODE = 0o660;

/** A sidecar serving on an address. */
export interface RunningServer {
  /** The address served on; for "host:0", with the port chosen. */
  readonly address: string;
  /** Resolves once the server has stopped. */
  readonly closed: Promise<void>;
  /**
   * Stops gracefully: health reports NOT_SERVING and its watchers are let go,
   * new calls are refused, calls in flight finish (at most the sidecar's
   * gracefulShutdownTimeoutMs, then their connections close).
   */
  stop(): Promise<void>;
}

/**
 * What the handlers of a service get besides the request: the call's signal,
 * and the trace context the caller sent in its metadata.
 */
type Call = { signal: AbortSignal; traceContext: Context };
type Handlers = Record<string, (req: never, call: Call) => unknown>;

/**
 * Serves a sidecar's SidecarService and gRPC's health service with
 * @grpc/grpc-js, over HTTP/2 cleartext on a unix socket or TCP, as the host's
 * gRPC client expects, and gRPC server reflection of both where the sidecar
 * says so. (The handlers are protocol-neutral: they take a request message,
 * an AbortSignal and the caller's trace context and throw ConnectErrors,
 * whose codes are gRPC's.) Tracing is set up from the OTEL_* environment
 * variables first, and shut down, its spans flushed, once stopped.
 */
export async function listen(sidecar: Sidecar, address: string): Promise<RunningServer> {
  const endpoint = parseAddress(address);
  if ("path" in endpoint) {
    await prepareSocket(endpoint.path);
  }
  const tracing = await setUpTracing(sidecar.name, sidecar.log);
  try {
    return await start(sidecar, address, endpoint, tracing);
  } catch (err) {
    await tracing.shutdown();
    throw err;
  }
}

async function start(sidecar: Sidecar, address: string, endpoint: Endpoint, tracing: Tracing): Promise<RunningServer> {
  const health = new HealthService();
  const server = new grpc.Server({
    "grpc.max_receive_message_length": sidecar.maxMessageSize,
    "grpc.max_send_message_length": sidecar.maxMessageSize,
    // "grpc.enable_channelz": 0 would save channelz's per-call bookkeeping,
    // but grpc-js 1.14 then no longer tracks sessions, and forceShutdown (the
    // graceful shutdown's timeout) leaves their calls running.
  });
  addService(server, SidecarService, sidecar.service);
  addService(server, Health, health.service);
  const reflection = sidecar.reflection ?? "path" in endpoint;
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
      sidecar.log.info("Stopping: waiting for the calls in flight", { timeoutMs: sidecar.gracefulShutdownTimeoutMs });
      health.shutdown();
      const timer = setTimeout(() => {
        sidecar.log.info("Calls still in flight after the graceful shutdown timeout; closing their connections");
        server.forceShutdown();
      }, sidecar.gracefulShutdownTimeoutMs);
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
 * Registers handlers for the unary and server-streaming methods of a
 * protobuf-es service on a grpc-js server. Each call gets an AbortSignal that
 * aborts when the client cancels or the call's deadline passes.
 */
function addService(server: grpc.Server, service: DescService, handlers: Handlers) {
  const definition: Record<string, grpc.MethodDefinition<unknown, unknown>> = {};
  const implementation: grpc.UntypedServiceImplementation = {};
  for (const method of service.methods) {
    const impl = handlers[method.localName];
    if (!impl || (method.methodKind !== "unary" && method.methodKind !== "server_streaming")) {
      continue;
    }
    const streaming = method.methodKind === "server_streaming";
    definition[method.localName] = {
      path: `/${service.typeName}/${method.name}`,
      requestStream: false,
      responseStream: streaming,
      requestSerialize: serialize(method.input),
      requestDeserialize: method.input === ReconcileRequestSchema ? decodeReconcileRequest : (b: Buffer) => fromBinary(method.input, b),
      responseSerialize: serialize(method.output),
      responseDeserialize: (b: Buffer) => fromBinary(method.output, b),
      originalName: method.localName,
    };
    // grpc-js ignores what a handler returns; the streaming one catches every error itself.
    // eslint-disable-next-line @typescript-eslint/no-misused-promises
    implementation[method.localName] = streaming
      ? async (call: grpc.ServerWritableStream<unknown, unknown>) => {
          const { signal, done } = callSignal(call);
          try {
            for await (const message of impl(call.request as never, { signal, traceContext: extractContext(call.metadata) }) as AsyncIterable<unknown>) {
              call.write(message);
            }
            call.end();
          } catch (err) {
            call.emit("error", serviceError(err));
          } finally {
            done();
          }
        }
      : (call: grpc.ServerUnaryCall<unknown, unknown>, callback: grpc.sendUnaryData<unknown>) => {
          const { signal, done } = callSignal(call);
          let answer: unknown;
          try {
            answer = impl(call.request as never, { signal, traceContext: extractContext(call.metadata) });
          } catch (err) {
            done();
            callback(serviceError(err));
            return;
          }
          if (typeof (answer as PromiseLike<unknown> | undefined)?.then !== "function") {
            done();
            callback(null, answer);
            return;
          }
          (answer as PromiseLike<unknown>).then(
            (resp) => {
              done();
              callback(null, resp);
            },
            (err: unknown) => {
              done();
              callback(serviceError(err));
            },
          );
        };
  }
  server.addService(definition, implementation);
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

/**
 * An AbortSignal for a call: aborted when the client cancels or the deadline
 * passes while the call runs. done, once the handler has answered, lets the
 * call go: grpc-js reports every call as cancelled once its stream closes,
 * answered or not, and that must neither abort the signal nor cost an error.
 */
function callSignal(call: { on(event: "cancelled", fn: () => void): unknown; off(event: "cancelled", fn: () => void): unknown; getDeadline(): grpc.Deadline }) {
  const controller = new AbortController();
  const cancelled = () => controller.abort(new ConnectError("the host cancelled the call", 1));
  call.on("cancelled", cancelled);
  const deadline = call.getDeadline();
  const ms = deadline instanceof Date ? deadline.getTime() - Date.now() : deadline - Date.now();
  const timer = Number.isFinite(ms) ? setTimeout(() => controller.abort(new ConnectError("the host's deadline passed", 4)), Math.max(ms, 0)) : undefined;
  return {
    signal: controller.signal,
    done: () => {
      clearTimeout(timer);
      call.off("cancelled", cancelled);
    },
  };
}

/** The gRPC status of a handler's error: a ConnectError's code (gRPC's own) and message, otherwise UNKNOWN. */
function serviceError(err: unknown): Partial<grpc.StatusObject> {
  if (err instanceof ConnectError) {
    return { code: err.code as number, details: err.rawMessage };
  }
  return { code: grpc.status.UNKNOWN, details: err instanceof Error ? err.message : String(err) };
}
