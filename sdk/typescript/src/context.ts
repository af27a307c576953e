import type { Span } from "@opentelemetry/api";

import type { Cluster } from "./cluster.js";
import type { Logger } from "./log.js";

/** A value, or a promise of one: what a handler may return. */
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
