import { Sidecar, type SidecarOptions } from "@polyop/sidecar";

import { finalizeConfigMapSync, reconcileConfigMapSync } from "./controller.js";
import { ConfigMapSync, configMaps, copiesIndex, finalizer } from "./types.js";
import { defaultConfigMapSync, validateConfigMapSync } from "./webhooks.js";

/**
 * The example's sidecar: one controller, its finalizer's handler and the two
 * admission webhooks of ConfigMapSync, and the index of ConfigMaps by the
 * sync that copied them.
 */
export function newSidecar(options: Partial<SidecarOptions> = {}): Sidecar {
  return new Sidecar({ name: "configmapsync-operator", ...options })
    .index(copiesIndex)
    .reconciler(
      {
        for: ConfigMapSync,
        // Status writes do not reconcile again; deletions still do.
        updateFilters: ["GenerationChanged", "DeletionChanged"],
        // A change to a source ConfigMap reconciles the syncs naming it.
        watches: [{ ...configMaps, fieldPath: "spec.source" }],
        maxConcurrentReconciles: 2,
        finalizer,
      },
      reconcileConfigMapSync,
    )
    .finalizer(ConfigMapSync, finalizeConfigMapSync)
    .defaulter({ for: ConfigMapSync }, defaultConfigMapSync)
    .validator({ for: ConfigMapSync }, validateConfigMapSync);
}
