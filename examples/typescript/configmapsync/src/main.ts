// The ConfigMapSync sidecar. Run it next to the polyop host:
//
//   node dist/main.js --address unix:///var/run/polyop/sidecar.sock
import { parseArgs } from "node:util";

import { DEFAULT_ADDRESS, jsonLogger, shutdownSignal, type LogLevel } from "@polyop/sidecar";

import { newSidecar } from "./sidecar.js";

const { values } = parseArgs({
  options: {
    address: { type: "string", default: DEFAULT_ADDRESS },
    "cluster-address": { type: "string" },
    "log-level": { type: "string", default: "info" },
  },
});

const level = values["log-level"] as LogLevel;
if (!["debug", "info", "error"].includes(level)) {
  console.error(`--log-level must be debug, info or error, not ${JSON.stringify(level)}`);
  process.exit(2);
}

const sidecar = newSidecar({
  logger: jsonLogger({ level, name: "configmapsync" }),
  ...(values["cluster-address"] ? { clusterAddress: values["cluster-address"] } : {}),
});
await sidecar.serve({ address: values.address, signal: shutdownSignal() });
