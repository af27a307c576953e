import type { Duration } from "@bufbuild/protobuf/wkt";
import * as grpc from "@grpc/grpc-js";

import { runCall, type CallFailure, type UnaryHandler } from "./call.js";
import type { CallStatus, ReconcileStreamRequest, ReconcileStreamResponse } from "./gen/polyop/v1alpha1/reconcile_pb.js";
import { extractMapContext } from "./tracing.js";

// SidecarService.ReconcileStream: Reconcile and Finalize calls as messages of
// one long-lived stream. Each call runs exactly as the same unary call does
// (runCall), with the deadline its timeout gives and the trace context its
// trace_context map carries, and is answered with the same id.

/** The handlers ReconcileStream passes its calls to: those of the unary Reconcile and Finalize. */
export interface StreamHandlers {
  reconcile: UnaryHandler;
  finalize: UnaryHandler;
}

/**
 * Serves ReconcileStream: handler is grpc-js's handler of the method, stop
 * ends its streams as the sidecar stops.
 *
 * A stream reads one request at a time, and the next only once the previous
 * one is answered (the host sends one call at a time; a client that sends
 * more waits, held back by gRPC's flow control, rather than growing the
 * sidecar's memory). A request without a call is answered with a CallStatus
 * INVALID_ARGUMENT and the stream goes on. At a call's deadline its signal
 * aborts, and the call is answered once the handler's promise settles, never
 * before: the host holds the object until that answer. When the host cancels
 * the stream, the signal of the call in flight aborts, as a unary call's does;
 * once the host closes its side, the stream ends with OK after the last
 * answer.
 */
export function reconcileStreams(handlers: StreamHandlers): {
  handler: grpc.handleBidiStreamingCall<ReconcileStreamRequest, ReconcileStreamResponse>;
  stop(): void;
} {
  /** How to stop each open stream. */
  const open = new Set<() => void>();
  let stopping = false;
  const handler = (stream: grpc.ServerDuplexStream<ReconcileStreamRequest, ReconcileStreamResponse>): void => {
    // Whether a call is in flight; whether the host has closed its side, or the sidecar is stopping: the stream
    // ends after the answer in flight, if any.
    let inFlight = false;
    let closed = false;
    let ending = false;
    const end = () => {
      if (stream.destroyed) {
        return;
      }
      if (closed) {
        stream.end();
      } else {
        // The host's call in flight on the stream, if it sent one meanwhile, fails with this status and is retried.
        stream.emit("error", { code: grpc.status.UNAVAILABLE, details: "the sidecar is stopping" });
      }
    };
    const stop = () => {
      ending = true;
      stream.pause();
      if (!inFlight) {
        end();
      }
    };
    const answer = (id: bigint, result: ReconcileStreamResponse["result"]) => {
      inFlight = false;
      if (stream.destroyed) {
        return; // cancelled: nobody waits for the answer
      }
      stream.write({ $typeName: "polyop.v1alpha1.ReconcileStreamResponse", id, result });
      if (closed || ending) {
        end();
      } else {
        stream.resume();
      }
    };
    stream.on("data", (req: ReconcileStreamRequest) => {
      if (ending) {
        return;
      }
      stream.pause();
      inFlight = true;
      const call = req.call;
      if (call.case === undefined) {
        const details = `the request ${req.id} carries no call: neither reconcile nor finalize`;
        answer(req.id, callStatus({ code: grpc.status.INVALID_ARGUMENT, details }));
        return;
      }
      runCall(handlers[call.case], call.value, stream, timeoutMs(req.timeout), extractMapContext(req.traceContext), (failure, value) =>
        answer(req.id, failure ? callStatus(failure) : ({ case: call.case, value } as ReconcileStreamResponse["result"])),
      );
    });
    stream.on("end", () => {
      closed = true;
      if (!inFlight) {
        end();
      }
    });
    stream.on("close", () => open.delete(stop));
    open.add(stop);
    if (stopping) {
      stop();
    }
  };
  return {
    handler,
    stop: () => {
      stopping = true;
      for (const stop of open) {
        stop();
      }
    },
  };
}

/** The result of a failed call: its gRPC status as a CallStatus. */
function callStatus(failure: CallFailure): ReconcileStreamResponse["result"] {
  const value: CallStatus = { $typeName: "polyop.v1alpha1.CallStatus", code: failure.code, message: failure.details };
  return { case: "error", value };
}

/** The milliseconds of a request's timeout; Infinity when it has none. */
function timeoutMs(timeout: Duration | undefined): number {
  return timeout ? Number(timeout.seconds) * 1000 + timeout.nanos / 1e6 : Infinity;
}
