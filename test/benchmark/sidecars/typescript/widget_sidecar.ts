// The Widget controller of polyop's end-to-end benchmark, as a TypeScript
// sidecar built with the TypeScript SDK (sdk/typescript).
//
// The same logic as the Go variants (test/benchmark/widget): each
// reconcile declares the Widget's ConfigMap, holding spec.data, as the
// complete set of its children, and marks the Widget Ready. The host applies
// the ConfigMap with server-side apply, makes the Widget its controller owner,
// and writes the status when it changed.
//
// The benchmark compiles it (tsc -b, into dist/) and runs:
//
//   node dist/widget_sidecar.js --address unix:///tmp/sidecar.sock [--max-concurrent-reconciles N]
import { parseArgs } from "node:util";

import {
  childrenComplete,
  DEFAULT_ADDRESS,
  jsonLogger,
  setCondition,
  shutdownSignal,
  Sidecar,
  type Condition,
  type KubeObject,
  type Result,
} from "@polyop/sidecar";

interface WidgetSpec {
  data?: Record<string, string>;
}

interface WidgetStatus {
  observedGeneration?: number;
  configMapName?: string;
  conditions?: Condition[];
}

type Widget = KubeObject<WidgetSpec, WidgetStatus>;

/** widget.WidgetLabel in Go. */
const widgetLabel = "bench.polyop.dev/widget";

function reconcile(w: Widget): Result {
  const name = w.metadata.name!;
  const generation = w.metadata.generation ?? 0;
  const status: WidgetStatus = w.status ?? {};
  w.status = status;
  status.observedGeneration = generation;
  status.configMapName = name;
  setCondition(status, {
    type: "Ready",
    status: "True",
    reason: "ConfigMapReady",
    message: "the ConfigMap holds the data",
    observedGeneration: generation,
  });
  return childrenComplete([
    {
      apiVersion: "v1",
      kind: "ConfigMap",
      metadata: { name, labels: { [widgetLabel]: name } },
      data: { ...(w.spec?.data ?? {}) },
    } as { apiVersion: string; kind: string; metadata: { name: string }; data: Record<string, string> },
  ]);
}

const { values } = parseArgs({
  options: {
    address: { type: "string", default: DEFAULT_ADDRESS },
    "max-concurrent-reconciles": { type: "string", default: "1" },
  },
});

const sidecar = new Sidecar({ name: "bench-widget", logger: jsonLogger({ level: "error", name: "bench-widget" }) }).reconciler<Widget>(
  {
    for: { apiVersion: "bench.polyop.dev/v1alpha1", kind: "Widget" },
    name: "widget",
    updateFilters: ["GenerationChanged"],
    owns: [{ apiVersion: "v1", kind: "ConfigMap" }],
    maxConcurrentReconciles: Number(values["max-concurrent-reconciles"]),
  },
  reconcile,
);
await sidecar.serve(values.address, { signal: shutdownSignal() });
