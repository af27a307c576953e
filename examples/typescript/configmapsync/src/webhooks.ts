import { DeniedError, field, type AdmissionContext, type FieldError, type Received } from "@polyop/sidecar";

import { labels, type ConfigMapSync } from "./types.js";

const dnsLabel = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;

/**
 * Fills in what a ConfigMapSync leaves out, as a mutating webhook: the copies'
 * name (the source's), a sorted, duplicate-free list of target namespaces, and
 * a label naming the source, so that `kubectl get configmapsyncs -l
 * configmapsync.examples.polyop.dev/source=ca-bundle` finds every sync of a
 * ConfigMap.
 */
export function defaultConfigMapSync(sync: Received<ConfigMapSync>, ctx: AdmissionContext<ConfigMapSync>): void {
  sync.spec.targetName ||= sync.spec.source;
  if (sync.spec.targetNamespaces) {
    const sorted = [...new Set(sync.spec.targetNamespaces)].sort();
    if (sorted.length !== sync.spec.targetNamespaces.length) {
      ctx.warn("spec.targetNamespaces listed a namespace twice; kept once");
    }
    sync.spec.targetNamespaces = sorted;
  }
  if (sync.spec.source) {
    sync.metadata.labels = { ...sync.metadata.labels, [labels.source]: sync.spec.source };
  }
}

/**
 * Refuses a ConfigMapSync that cannot work, as a validating webhook, with one
 * field error per problem: no target at all, a target namespace that is not a
 * namespace name, or a copy that would overwrite its own source. (A spec the
 * ConfigMapSync model itself refuses, say a source that is no string, is
 * denied with the model's field errors before this runs.)
 */
export function validateConfigMapSync(sync: Received<ConfigMapSync>, ctx: AdmissionContext<ConfigMapSync>): string[] {
  if (ctx.operation === "DELETE") {
    return [];
  }
  const errors: FieldError[] = [];
  const targets = sync.spec.targetNamespaces ?? [];
  if (targets.length === 0 && !sync.spec.namespaceSelector) {
    errors.push(field.required("spec.targetNamespaces", "name at least one target namespace, or set spec.namespaceSelector"));
  }
  targets.forEach((ns, i) => {
    if (!dnsLabel.test(ns) || ns.length > 63) {
      errors.push(field.invalid(`spec.targetNamespaces[${i}]`, ns, "must be a namespace name (a DNS-1123 label)"));
    }
  });
  const targetName = sync.spec.targetName || sync.spec.source;
  const own = targets.indexOf(sync.metadata.namespace);
  if (own >= 0 && targetName === sync.spec.source) {
    errors.push(
      field.invalid(`spec.targetNamespaces[${own}]`, targets[own], "the source's own namespace: the copy would overwrite the source; set spec.targetName"),
    );
  }
  if (errors.length > 0) {
    throw new DeniedError("", errors);
  }
  return [];
}
