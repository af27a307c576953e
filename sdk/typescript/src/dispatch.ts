import { Code, ConnectError } from "@connectrpc/connect";
import type { Context, Span } from "@opentelemetry/api";

import type { Cluster } from "./cluster.js";
import type { Logger } from "./log.js";
import { decodeJSON } from "./objects.js";
import type { Registry } from "./registry.js";

export type MaybePromise<T> = T | Promise<T>;

/** What every handler gets beside its object. */
export interface CallContext {
  /** Aborted when the host's deadline passes or the host gives up on the call. */
  readonly signal: AbortSignal;
  /** A logger naming the call's object. */
  readonly log: Logger;
  /**
   * The host's Cluster service, its calls bound to signal, each a client span
   * of the call's trace. Throws if no address is known.
   */
  readonly cluster: Cluster;
  /**
   * The call's OpenTelemetry server span, child of the host's: add attributes
   * and events to it, or start spans under it. Inside the handler it is also
   * trace.getActiveSpan() (with a context manager registered, as the SDK does
   * when it sets up tracing). When tracing is off it records nothing, and
   * carries the host's trace and span IDs if the host sent them.
   */
  readonly span: Span;
}

/**
 * A call as the handlers of SidecarService get it: its signal, and the trace
 * context the host sent (the active one when absent, as in the test harness).
 */
export interface Call {
  readonly signal: AbortSignal;
  readonly traceContext?: Context;
}

/**
 * What the handlers of SidecarService need from their Sidecar: its name and
 * logger, what is registered on it, and its Cluster.
 */
export interface SidecarEnv {
  readonly name: string;
  readonly log: Logger;
  readonly registry: Registry;
  /** The Cluster for a call: bound to its signal and trace context when it is the host's. */
  clusterFor(signal: AbortSignal, traceContext: Context): Cluster;
}

/**
 * The context every call shares, in the call's server span (whose context is
 * traceContext); its cluster is made on first use, as an unknown address
 * throws.
 */
export function callContext(env: SidecarEnv, signal: AbortSignal, log: Logger, span: Span, traceContext: Context): CallContext {
  return {
    signal,
    log,
    span,
    get cluster() {
      return env.clusterFor(signal, traceContext);
    },
  };
}

/** Decodes a JSON object a request carries; anything else is INVALID_ARGUMENT naming what. */
export function decode<T>(data: Uint8Array, what: string): T {
  try {
    const value = decodeJSON<T>(data);
    if (typeof value !== "object" || value === null || Array.isArray(value)) {
      throw new Error("not a JSON object");
    }
    return value;
  } catch (err) {
    throw new ConnectError(`decoding ${what}: ${err instanceof Error ? err.message : String(err)}`, Code.InvalidArgument);
  }
}
