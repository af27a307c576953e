import { Code, ConnectError } from "@connectrpc/connect";
import * as grpc from "@grpc/grpc-js";
import type { Context } from "@opentelemetry/api";

// One call of a unary SidecarService method, however it came: as a gRPC call
// of its own, or as a message of ReconcileStream. Either way it gets the same
// signal (aborted by the host's cancel and by its deadline), runs the same
// handler, and ends with the handler's answer or the same gRPC status.

/**
 * What the handlers of a service get besides the request: the call's signal,
 * and the trace context the caller sent.
 */
export interface HandlerCall {
  readonly signal: AbortSignal;
  readonly traceContext: Context;
}

/** A handler of a unary method: a request message in, an answer (or a promise of one) out; a failure is thrown. */
export type UnaryHandler = (req: never, call: HandlerCall) => unknown;

/**
 * What a call travels on, as far as its cancellation goes: grpc-js's call, or
 * the ReconcileStream a call is a message of. Its "cancelled" event means the
 * host gave up.
 */
export interface Cancellable {
  on(event: "cancelled", fn: () => void): unknown;
  off(event: "cancelled", fn: () => void): unknown;
}

/** The gRPC status a call ends with instead of an answer. */
export type CallFailure = { code: grpc.status; details: string };

/**
 * Runs one call: handler with request, a signal aborted when the host cancels
 * (on's "cancelled") or timeoutMs passes (Infinity: never), and the caller's
 * trace context; then settles it with the handler's answer, or with the gRPC
 * status of its error (see callFailure). An answer that comes once the signal
 * has aborted settles the call with the abort's status instead
 * (DEADLINE_EXCEEDED or CANCELLED), as gRPC has ended the call by then. A
 * handler answering at once (no promise) is settled at once.
 */
export function runCall(
  handler: UnaryHandler,
  request: unknown,
  on: Cancellable,
  timeoutMs: number,
  traceContext: Context,
  settle: (failure: CallFailure | null, answer?: unknown) => void,
): void {
  const { signal, done } = callSignal(on, timeoutMs);
  const succeed = (answer: unknown) => {
    done();
    if (signal.aborted) {
      settle(callFailure(signal.reason));
    } else {
      settle(null, answer);
    }
  };
  const fail = (err: unknown) => {
    done();
    settle(callFailure(signal.aborted ? signal.reason : err));
  };
  let answer: unknown;
  try {
    answer = handler(request as never, { signal, traceContext });
  } catch (err) {
    fail(err);
    return;
  }
  if (typeof (answer as PromiseLike<unknown> | undefined)?.then === "function") {
    (answer as PromiseLike<unknown>).then(succeed, fail);
  } else {
    succeed(answer);
  }
}

/**
 * An AbortSignal for a call: aborted when the host cancels or timeoutMs passes
 * while the call runs. done, once the handler has answered, lets the call go:
 * grpc-js reports every call as cancelled once its stream closes, answered or
 * not, and that must neither abort the signal nor cost an error.
 */
export function callSignal(on: Cancellable, timeoutMs: number): { signal: AbortSignal; done: () => void } {
  const controller = new AbortController();
  const cancelled = () => controller.abort(new ConnectError("the host cancelled the call", Code.Canceled));
  on.on("cancelled", cancelled);
  const timer = Number.isFinite(timeoutMs)
    ? setTimeout(() => controller.abort(new ConnectError("the host's deadline passed", Code.DeadlineExceeded)), Math.max(timeoutMs, 0))
    : undefined;
  return {
    signal: controller.signal,
    done: () => {
      clearTimeout(timer);
      on.off("cancelled", cancelled);
    },
  };
}

/** The milliseconds left before a grpc-js call's deadline; Infinity for none. */
export function timeLeft(deadline: grpc.Deadline): number {
  return deadline instanceof Date ? deadline.getTime() - Date.now() : deadline - Date.now();
}

/** The gRPC status of a handler's error: a ConnectError's code (gRPC's own) and message, otherwise UNKNOWN. */
export function callFailure(err: unknown): CallFailure {
  if (err instanceof ConnectError) {
    return { code: err.code as number, details: err.rawMessage };
  }
  return { code: grpc.status.UNKNOWN, details: err instanceof Error ? err.message : String(err) };
}
