import {
  formatKey,
  ignoreNotFound,
  isConditionTrue,
  markConditionFalse,
  markConditionTrue,
  NotFoundError,
  READY,
  type Cluster,
  type Received,
  type ReconcileContext,
  type Result,
} from "@polyop/sidecar";

import {
  annotations,
  ConfigMapKind,
  configMaps,
  copiesIndex,
  labels,
  managedByValue,
  Namespace,
  type ConfigMap,
  type ConfigMapSync,
  type ConfigMapSyncStatus,
  type FailedTarget,
} from "./types.js";

/** How often a ConfigMapSync is checked again when all is well: copies edited by hand drift back, new namespaces are found. */
export const resyncMs = 5 * 60_000;
/** How soon a ConfigMapSync with failed targets is tried again. */
export const retryFailedMs = 30_000;

/**
 * Reconciles a ConfigMapSync, imperatively through the host's Cluster
 * service: read the source, create or update a copy in each target namespace,
 * delete the copies no longer wanted, and report what happened in the status.
 *
 * Copies live in other namespaces, where owner references cannot point, so
 * they are found by a label holding the ConfigMapSync's uid; the finalizer
 * (finalizeConfigMapSync) deletes them with it.
 */
export async function reconcileConfigMapSync(sync: Received<ConfigMapSync>, ctx: ReconcileContext): Promise<Result> {
  const cluster = ctx.cluster;
  const namespace = sync.metadata.namespace;
  const generation = sync.metadata.generation;
  const previouslySynced = sync.status?.syncedNamespaces ?? [];
  const status: ConfigMapSyncStatus = { conditions: sync.status?.conditions ?? [] };
  sync.status = status;
  status.observedGeneration = generation;

  const source = await cluster.get(ConfigMapKind, { namespace, name: sync.spec.source }).catch(ignoreNotFound);
  if (!source) {
    const message = `ConfigMap ${namespace}/${sync.spec.source} does not exist`;
    if (markConditionFalse(status, READY, "SourceNotFound", message, generation)) {
      ctx.event("Warning", "SourceNotFound", message);
    }
    // The host watches ConfigMaps named by spec.source: creating it reconciles again.
    return { requeueAfter: resyncMs };
  }
  status.sourceResourceVersion = source.metadata?.resourceVersion;

  const targetName = sync.spec.targetName || sync.spec.source;
  const targets = await targetNamespaces(sync, cluster);
  status.targetCount = targets.length;
  const synced: string[] = [];
  const failed: FailedTarget[] = [];
  const changes = { created: 0, updated: 0, pruned: 0 };
  for (const target of targets) {
    try {
      const change = await syncCopy(cluster, sync, source, { namespace: target, name: targetName });
      if (change) {
        changes[change]++;
      }
      synced.push(target);
    } catch (err) {
      if (err instanceof TargetError) {
        failed.push({ namespace: target, reason: err.reason, message: err.message });
        continue;
      }
      throw err; // the host retries with backoff; the status so far is still written
    }
  }

  // Copies this sync made that are no longer wanted: a namespace left the
  // targets, or the target name changed. They are where it copies now or
  // copied last time (the status says where), and the index finds them there
  // in the host's cache.
  for (const where of new Set([...targets, ...previouslySynced])) {
    const copies = await cluster.list(ConfigMapKind, { namespace: where, fieldSelector: `${copiesIndex.name}=${sync.metadata.uid}` });
    for (const { metadata = {} } of copies.items) {
      const wanted = metadata.name === targetName && targets.includes(where);
      if (!wanted && metadata.name) {
        await cluster.delete(ConfigMapKind, { namespace: where, name: metadata.name }, { preconditions: { uid: metadata.uid ?? "" } }).catch(ignoreNotFound);
        changes.pruned++;
      }
    }
  }

  status.syncedNamespaces = synced.sort();
  status.syncedCount = synced.length;
  status.failedTargets = failed;
  if (changes.created + changes.updated + changes.pruned > 0) {
    ctx.event(
      "Normal",
      "Synced",
      `copied ${formatKey({ namespace, name: sync.spec.source })} to ${synced.length} of ${targets.length} namespaces (created ${changes.created}, updated ${changes.updated}, pruned ${changes.pruned})`,
    );
  }
  if (failed.length > 0) {
    const message = failed.map((f) => `${f.namespace}: ${f.message}`).join("; ");
    markConditionFalse(status, READY, "SyncFailed", message, generation);
    ctx.event("Warning", "SyncFailed", message);
    return { requeueAfter: retryFailedMs };
  }
  const becameReady = !isConditionTrue(status, READY);
  markConditionTrue(status, READY, "Synced", `${synced.length} copies up to date`, generation);
  if (becameReady) {
    ctx.log.info("The ConfigMapSync is ready", { targets: synced });
  }
  return { requeueAfter: resyncMs };
}

/** The explicit target namespaces and those the selector matches, deduplicated and sorted. */
async function targetNamespaces(sync: Received<ConfigMapSync>, cluster: Cluster): Promise<string[]> {
  const targets = new Set(sync.spec.targetNamespaces ?? []);
  if (sync.spec.namespaceSelector) {
    const selected = await cluster.list(Namespace, { labelSelector: sync.spec.namespaceSelector });
    for (const ns of selected.items) {
      if (ns.metadata?.name) {
        targets.add(ns.metadata.name);
      }
    }
  }
  // Never overwrite the source with its own copy.
  if ((sync.spec.targetName || sync.spec.source) === sync.spec.source) {
    targets.delete(sync.metadata.namespace);
  }
  return [...targets].sort();
}

/** A target that cannot be synced until something outside changes. */
class TargetError extends Error {
  constructor(
    readonly reason: string,
    message: string,
  ) {
    super(message);
  }
}

/** Creates or updates one copy; returns what it did, or undefined when the copy was up to date. */
async function syncCopy(
  cluster: Cluster,
  sync: Received<ConfigMapSync>,
  source: ConfigMap,
  key: { namespace: string; name: string },
): Promise<"created" | "updated" | undefined> {
  const desired = {
    ...configMaps,
    metadata: {
      ...key,
      labels: { [labels.owner]: sync.metadata.uid ?? "", [labels.managedBy]: managedByValue },
      annotations: {
        [annotations.source]: formatKey({ namespace: sync.metadata.namespace, name: sync.spec.source }),
        [annotations.sourceResourceVersion]: source.metadata?.resourceVersion ?? "",
      },
    },
    ...(source.data ? { data: source.data } : {}),
    ...(source.binaryData ? { binaryData: source.binaryData } : {}),
  } satisfies ConfigMap;
  const existing = await cluster.get(ConfigMapKind, key).catch(ignoreNotFound);
  if (!existing) {
    try {
      await cluster.create(desired);
      return "created";
    } catch (err) {
      if (err instanceof NotFoundError) {
        throw new TargetError("NamespaceNotFound", `namespace ${key.namespace} does not exist`);
      }
      throw err;
    }
  }
  if (existing.metadata?.labels?.[labels.owner] !== sync.metadata.uid) {
    throw new TargetError("TargetExists", `ConfigMap ${formatKey(key)} exists and is not managed by this ConfigMapSync; leaving it alone`);
  }
  const upToDate =
    JSON.stringify(existing.data ?? {}) === JSON.stringify(desired.data ?? {}) &&
    JSON.stringify(existing.binaryData ?? {}) === JSON.stringify(desired.binaryData ?? {}) &&
    existing.metadata?.annotations?.[annotations.sourceResourceVersion] === desired.metadata.annotations[annotations.sourceResourceVersion];
  if (upToDate) {
    return undefined;
  }
  // Keep what others added to the copy's metadata; replace the data.
  const updated: ConfigMap = {
    ...existing,
    metadata: {
      ...existing.metadata,
      labels: { ...existing.metadata?.labels, ...desired.metadata.labels },
      annotations: { ...existing.metadata?.annotations, ...desired.metadata.annotations },
    },
  };
  delete updated.data;
  delete updated.binaryData;
  Object.assign(updated, desired.data ? { data: desired.data } : {}, desired.binaryData ? { binaryData: desired.binaryData } : {});
  await cluster.update(updated); // a ConflictError is retried by the host with backoff
  return "updated";
}

/**
 * Deletes every copy of a ConfigMapSync being deleted; the host then removes
 * the finalizer. Once, so thoroughly: in every namespace, by the owner label,
 * from the API server, so that no copy stays behind, not even one in a
 * namespace the status never recorded.
 */
export async function finalizeConfigMapSync(sync: Received<ConfigMapSync>, ctx: ReconcileContext): Promise<void> {
  const copies = await ctx.cluster.list(ConfigMapKind, { labelSelector: `${labels.owner}=${sync.metadata.uid}`, uncached: true });
  for (const { metadata = {} } of copies.items) {
    if (metadata.name) {
      await ctx.cluster.delete(ConfigMapKind, { namespace: metadata.namespace ?? "", name: metadata.name }).catch(ignoreNotFound);
    }
  }
  if (copies.items.length > 0) {
    ctx.event("Normal", "CopiesDeleted", `deleted ${copies.items.length} copies of ${sync.spec.source}`);
  }
}
