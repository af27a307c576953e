// The TypeScript side of BenchmarkHopTypeScript: a sidecar built with the
// polyop TypeScript SDK (compiled by tsc -b sdk/typescript) whose reconciler
// does what the Go benchmark's does to a MaintenanceWindow (phase, observed
// generation, a Ready condition, requeue after an hour), so that the two hops
// compare like for like.
//
//     node hop_sidecar.mjs unix:///path/to/sidecar.sock
import { discardLogger, setCondition, shutdownSignal, Sidecar } from "@polyop/sidecar";

const sidecar = new Sidecar({ name: "bench", logger: discardLogger });
sidecar.reconciler(
  { for: { apiVersion: "examples.polyop.dev/v1", kind: "MaintenanceWindow" }, name: "maintenancewindow" },
  (mw) => {
    const generation = mw.metadata.generation;
    mw.status ??= {};
    mw.status.phase = "Active";
    mw.status.observedGeneration = generation;
    setCondition(mw.status, { type: "Ready", status: "True", reason: "Scheduled", message: "the window is open", observedGeneration: generation });
    return { requeueAfter: 3_600_000 };
  },
);
await sidecar.serve(process.argv[2], { signal: shutdownSignal() });
