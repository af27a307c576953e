import { Code, ConnectError } from "@connectrpc/connect";
import type { Context, Span } from "@opentelemetry/api";

import type { Cluster } from "./cluster.js";
import type { CallContext } from "./context.js";
import type { Logger } from "./log.js";
import { decodeJSON } from "./objects.js";
import type { Registry } from "./registry.js";

// What the dispatch of every SidecarService call shares: the call, what it
// sees of its sidecar, the context its handler gets, and request decoding.

/**
 * A call as the handlers of SidecarService get it: its signal, and the trace
 * context the host sent (the active one when absent, as in the test harness).
 */
export interface Call {
  readonly signal: AbortSignal;
  readonly traceContext?: Context;
}

/**
 * What the handlers of SidecarService need from their sidecar: its name and
 * logger, what is registered on it, and its Cluster. The Sidecar gives it;
 * nothing here knows the Sidecar.
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
