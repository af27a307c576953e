import { Code, ConnectError } from "@connectrpc/connect";

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
  /** The host's Cluster service, its calls bound to signal. Throws if no address is known. */
  readonly cluster: Cluster;
}

/**
 * What the handlers of SidecarService need from their Sidecar: its name and
 * logger, what is registered on it, and its Cluster.
 */
export interface SidecarEnv {
  readonly name: string;
  readonly log: Logger;
  readonly registry: Registry;
  /** The Cluster for a call: bound to its signal when it is the host's. */
  clusterFor(signal: AbortSignal): Cluster;
}

/** The context every call shares; its cluster is made on first use, as an unknown address throws. */
export function callContext(env: SidecarEnv, signal: AbortSignal, log: Logger): CallContext {
  return {
    signal,
    log,
    get cluster() {
      return env.clusterFor(signal);
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
