import type { Condition, KubeObject, KubeResource } from "@polyop/sidecar";

/** The kind this example reconciles. */
export const configMapSyncs = { apiVersion: "examples.polyop.dev/v1", kind: "ConfigMapSync" } as const;
export const configMaps = { apiVersion: "v1", kind: "ConfigMap" } as const;
export const namespaces = { apiVersion: "v1", kind: "Namespace" } as const;

/** Labels and annotations the example sets, all under its own prefix. */
export const labels = {
  /** On every copy: the uid of the ConfigMapSync that owns it (owner references cannot cross namespaces). */
  owner: "configmapsync.examples.polyop.dev/owner-uid",
  /** On every copy. */
  managedBy: "app.kubernetes.io/managed-by",
  /** On each ConfigMapSync, set by the defaulter: the source's name, for kubectl get -l. */
  source: "configmapsync.examples.polyop.dev/source",
} as const;

export const annotations = {
  /** On every copy: the source, as namespace/name. */
  source: "configmapsync.examples.polyop.dev/source",
  /** On every copy: the source's resourceVersion copied. */
  sourceResourceVersion: "configmapsync.examples.polyop.dev/source-resource-version",
} as const;

export const managedByValue = "configmapsync.examples.polyop.dev";

/** The finalizer that lets the copies be deleted with their ConfigMapSync. */
export const finalizer = "configmapsync.examples.polyop.dev/cleanup";

export interface ConfigMapSyncSpec {
  /** The ConfigMap to copy, in the ConfigMapSync's namespace. */
  source: string;
  /** The name of the copies. Defaults to the source's. */
  targetName?: string;
  /** The namespaces to copy into. */
  targetNamespaces?: string[];
  /** Also copy into every namespace matching this label selector (kubectl -l syntax). */
  namespaceSelector?: string;
}

/** A namespace the source could not be copied into, and why. */
export interface FailedTarget {
  namespace: string;
  reason: string;
  message: string;
}

export interface ConfigMapSyncStatus {
  observedGeneration?: number;
  /** The resourceVersion of the source last copied. */
  sourceResourceVersion?: string;
  /** The namespaces holding an up-to-date copy, sorted. */
  syncedNamespaces?: string[];
  failedTargets?: FailedTarget[];
  syncedCount?: number;
  targetCount?: number;
  conditions?: Condition[];
}

export type ConfigMapSync = KubeObject<ConfigMapSyncSpec, ConfigMapSyncStatus>;

export interface ConfigMap extends KubeResource {
  data?: Record<string, string>;
  binaryData?: Record<string, string>;
  immutable?: boolean;
}
