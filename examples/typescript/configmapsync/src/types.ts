import { Type, type Static } from "@sinclair/typebox";

import { defineKind, Kube } from "@polyop/sidecar/crd";
import type { IConfigMap } from "kubernetes-models/v1/ConfigMap";

// The built-in kinds are kubernetes-models' typed classes (ConfigMap,
// Namespace): given as the kind of a Cluster call, they type what it reads.
export { ConfigMap as ConfigMapKind } from "kubernetes-models/v1/ConfigMap";
export { Namespace } from "kubernetes-models/v1/Namespace";

/** ConfigMap's apiVersion and kind, spread into the index and the watch. */
export const configMaps = { apiVersion: "v1", kind: "ConfigMap" } as const;

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

/**
 * The index of ConfigMaps by the uid of the ConfigMapSync that made them (the
 * owner-uid label), which the host keeps in its cache: a reconcile lists a
 * sync's copies in a namespace by it, as a kubebuilder controller lists its
 * children by an owner index (copies cannot carry owner references: they
 * live in other namespaces).
 */
export const copiesIndex = { ...configMaps, name: "copyOf", fieldPath: `.metadata.labels['${labels.owner}']` } as const;

/** The finalizer that lets the copies be deleted with their ConfigMapSync. */
export const finalizer = "configmapsync.examples.polyop.dev/cleanup";

/** What to copy where. */
export const ConfigMapSyncSpec = Type.Object(
  {
    source: Type.String({ minLength: 1, maxLength: 253, description: "The name of the ConfigMap to copy, in this namespace." }),
    targetName: Type.Optional(Type.String({ maxLength: 253, description: "The name of the copies. Defaulted to the source's name." })),
    targetNamespaces: Type.Optional(
      Type.Array(Type.String({ maxLength: 63 }), { maxItems: 1000, description: "The namespaces to copy into." }),
    ),
    namespaceSelector: Type.Optional(
      Type.String({
        maxLength: 1024,
        description: 'Also copy into every namespace whose labels match this selector,\nin kubectl\'s -l syntax (for example "team in (a,b)").',
      }),
    ),
  },
  { description: "ConfigMapSyncSpec says what to copy where." },
);
export type ConfigMapSyncSpec = Static<typeof ConfigMapSyncSpec>;

/** A namespace the source could not be copied into, and why. */
export const FailedTarget = Type.Object({ namespace: Type.String(), reason: Type.String(), message: Type.String() });
export type FailedTarget = Static<typeof FailedTarget>;

/** What was copied where. */
export const ConfigMapSyncStatus = Kube.Status(
  {
    conditions: Type.Optional(Kube.Conditions({ description: "Ready is True when every target holds an up-to-date copy." })),
    sourceResourceVersion: Type.Optional(Type.String({ description: "The resourceVersion of the source last copied." })),
    syncedNamespaces: Type.Optional(Type.Array(Type.String(), { description: "The target namespaces holding an up-to-date copy." })),
    failedTargets: Type.Optional(Type.Array(FailedTarget, { description: "The target namespaces the source could not be copied into, and why." })),
    syncedCount: Type.Optional(Type.Integer({ description: "How many target namespaces hold an up-to-date copy." })),
    targetCount: Type.Optional(Type.Integer({ description: "How many target namespaces there are." })),
  },
  { description: "ConfigMapSyncStatus says what was copied where." },
);
export type ConfigMapSyncStatus = Static<typeof ConfigMapSyncStatus>;

/**
 * The kind this example reconciles: its static type, and its CRD, which
 * `make generate-examples` writes into config/crd with polyop-crd from the
 * compiled module.
 */
export const ConfigMapSync = defineKind({
  group: "examples.polyop.dev",
  version: "v1",
  kind: "ConfigMapSync",
  shortNames: ["cms"],
  description:
    "ConfigMapSync copies a ConfigMap of its namespace into other namespaces\nand keeps the copies up to date; the copies go when it goes.",
  spec: ConfigMapSyncSpec,
  status: ConfigMapSyncStatus,
  printerColumns: [
    { name: "Source", type: "string", jsonPath: ".spec.source" },
    { name: "Synced", type: "integer", jsonPath: ".status.syncedCount" },
    { name: "Targets", type: "integer", jsonPath: ".status.targetCount" },
    { name: "Ready", type: "string", jsonPath: '.status.conditions[?(@.type=="Ready")].status' },
    { name: "Reason", type: "string", jsonPath: '.status.conditions[?(@.type=="Ready")].reason', priority: 1 },
    { name: "Age", type: "date", jsonPath: ".metadata.creationTimestamp" },
  ],
});
export type ConfigMapSync = Static<typeof ConfigMapSync>;

/** ConfigMapSync's apiVersion and kind, for objects and registrations. */
export const configMapSyncs = { apiVersion: ConfigMapSync.apiVersion, kind: ConfigMapSync.kind };

/** A ConfigMap, as kubernetes-models types it. */
export type ConfigMap = IConfigMap;
