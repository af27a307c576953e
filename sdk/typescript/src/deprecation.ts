import type { Logger } from "./log.js";

// The SDK's deprecated shapes still work, for one release, and say so: once
// per process as a Node.js DeprecationWarning (what `node --no-deprecation`
// silences and `--throw-deprecation` makes fatal), and in the sidecar's log
// when one is at hand.

const emitted = new Set<string>();

/**
 * Reports the use of a deprecated shape: a DeprecationWarning with code the
 * first time, and a line in log every time.
 */
export function deprecated(code: string, message: string, log?: Logger): void {
  log?.info(`Deprecated: ${message}`, { deprecation: code });
  if (!emitted.has(code)) {
    emitted.add(code);
    process.emitWarning(message, { type: "DeprecationWarning", code });
  }
}
