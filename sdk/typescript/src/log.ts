/** Structured key-value pairs attached to a log line. */
export type LogFields = Record<string, unknown>;

/**
 * Logger is what the SDK logs through, and what each reconcile gets, with the
 * controller, kind, namespace and name attached. Adapt pino, winston or
 * anything else to it in a few lines.
 */
export interface Logger {
  debug(message: string, fields?: LogFields): void;
  info(message: string, fields?: LogFields): void;
  error(message: string, fields?: LogFields): void;
  /** A logger that adds fields to every line. */
  child(fields: LogFields): Logger;
}

/** The level below which a jsonLogger drops lines. */
export type LogLevel = "debug" | "info" | "error";

const rank: Record<LogLevel, number> = { debug: 0, info: 1, error: 2 };

/**
 * A Logger writing one JSON object per line, with the keys controller-runtime's
 * zap logger uses (level, ts, logger, msg), so that the host's and the
 * sidecar's logs read alike. Errors are written with their message and stack.
 */
export function jsonLogger(options: { level?: LogLevel; name?: string; write?: (line: string) => void } = {}): Logger {
  const min = rank[options.level ?? "info"];
  const write = options.write ?? ((line: string) => process.stderr.write(line + "\n"));
  const make = (base: LogFields): Logger => {
    const log = (level: LogLevel, message: string, fields?: LogFields) => {
      if (rank[level] < min) {
        return;
      }
      const line: LogFields = { level, ts: Date.now() / 1000, msg: message, ...base };
      if (options.name !== undefined) {
        line["logger"] = options.name;
      }
      for (const [key, value] of Object.entries(fields ?? {})) {
        line[key] = value instanceof Error ? (value.stack ?? value.message) : value;
      }
      write(JSON.stringify(line));
    };
    return {
      debug: (message, fields) => log("debug", message, fields),
      info: (message, fields) => log("info", message, fields),
      error: (message, fields) => log("error", message, fields),
      child: (fields) => make({ ...base, ...fields }),
    };
  };
  return make({});
}

/** A Logger that drops every line. */
export const discardLogger: Logger = {
  debug: () => {},
  info: () => {},
  error: () => {},
  child: () => discardLogger,
};
