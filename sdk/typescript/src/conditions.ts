/**
 * Status conditions, as metav1.Condition and the functions of
 * k8s.io/apimachinery/pkg/api/meta (SetStatusCondition and friends).
 */

/** The condition type that says an object is ready, by Kubernetes convention: "Ready". */
export const READY = "Ready";

/** The status of a condition. */
export type ConditionStatus = "True" | "False" | "Unknown";

/** metav1.Condition. */
export interface Condition {
  /** The condition's type, in CamelCase, for example "Ready". */
  type: string;
  status: ConditionStatus;
  /** The metadata.generation the condition was set for. */
  observedGeneration?: number;
  /** When the status last changed, as RFC 3339 in whole seconds. */
  lastTransitionTime: string;
  /** A CamelCase reason for the status, for example "SourceNotFound". */
  reason: string;
  /** A human-readable message; may be empty. */
  message: string;
}

/** What setCondition takes: a condition whose lastTransitionTime it fills in. */
export type NewCondition = Omit<Condition, "lastTransitionTime" | "message"> & {
  message?: string;
  lastTransitionTime?: string;
};

/** Something holding conditions: a status, or the conditions array itself. */
export type Conditions = Condition[] | { conditions?: Condition[] };

/** The current time as metav1.Time writes it: RFC 3339, whole seconds, UTC. */
export function now(): string {
  return new Date().toISOString().replace(/\.\d+Z$/, "Z");
}

function list(target: Conditions, create: boolean): Condition[] | undefined {
  if (Array.isArray(target)) {
    return target;
  }
  if (create) {
    target.conditions ??= [];
  }
  return target.conditions;
}

/**
 * Sets a condition on a status (or a conditions array) as
 * meta.SetStatusCondition does: the condition is added if absent; otherwise
 * its status, reason, message and observedGeneration are updated, and its
 * lastTransitionTime changes only when its status does. Returns whether
 * anything changed.
 *
 *     setCondition(obj.status, { type: "Ready", status: "True", reason: "Synced", observedGeneration: obj.metadata.generation });
 */
export function setCondition(target: Conditions, condition: NewCondition): boolean {
  const conditions = list(target, true)!;
  const { lastTransitionTime, message = "", ...rest } = condition;
  const existing = conditions.find((c) => c.type === condition.type);
  if (!existing) {
    conditions.push({ ...rest, message, lastTransitionTime: lastTransitionTime ?? now() });
    return true;
  }
  let changed = false;
  if (existing.status !== condition.status) {
    existing.status = condition.status;
    existing.lastTransitionTime = lastTransitionTime ?? now();
    changed = true;
  }
  if (existing.reason !== condition.reason) {
    existing.reason = condition.reason;
    changed = true;
  }
  if (existing.message !== message) {
    existing.message = message;
    changed = true;
  }
  // metav1.Condition omits a zero observedGeneration: absent and 0 are equal.
  if ((existing.observedGeneration ?? 0) !== (condition.observedGeneration ?? 0)) {
    if (condition.observedGeneration === undefined) {
      delete existing.observedGeneration;
    } else {
      existing.observedGeneration = condition.observedGeneration;
    }
    changed = true;
  }
  return changed;
}

/** Returns the condition of the type, or undefined. */
export function findCondition(target: Conditions | undefined, type: string): Condition | undefined {
  return target === undefined ? undefined : list(target, false)?.find((c) => c.type === type);
}

/** Removes the condition of the type; returns whether there was one. */
export function removeCondition(target: Conditions, type: string): boolean {
  const conditions = list(target, false);
  const i = conditions?.findIndex((c) => c.type === type) ?? -1;
  if (i < 0) {
    return false;
  }
  conditions!.splice(i, 1);
  return true;
}

/** Reports whether the condition of the type is present with status "True". */
export function isConditionTrue(target: Conditions | undefined, type: string): boolean {
  return findCondition(target, type)?.status === "True";
}

/** Reports whether the condition of the type is present with status "False". */
export function isConditionFalse(target: Conditions | undefined, type: string): boolean {
  return findCondition(target, type)?.status === "False";
}

/** Reports whether the condition of the type is present with status "Unknown". */
export function isConditionUnknown(target: Conditions | undefined, type: string): boolean {
  return findCondition(target, type)?.status === "Unknown";
}

/**
 * Sets the condition of the type to status "True" with reason and message,
 * for observedGeneration (as setCondition). Returns whether anything changed.
 *
 *     markConditionTrue(obj.status, READY, "Synced", "every copy is up to date", obj.metadata.generation);
 */
export function markConditionTrue(target: Conditions, type: string, reason: string, message = "", observedGeneration?: number): boolean {
  return mark(target, type, "True", reason, message, observedGeneration);
}

/** Sets the condition of the type to status "False" (see markConditionTrue). Returns whether anything changed. */
export function markConditionFalse(target: Conditions, type: string, reason: string, message = "", observedGeneration?: number): boolean {
  return mark(target, type, "False", reason, message, observedGeneration);
}

/** Sets the condition of the type to status "Unknown" (see markConditionTrue). Returns whether anything changed. */
export function markConditionUnknown(target: Conditions, type: string, reason: string, message = "", observedGeneration?: number): boolean {
  return mark(target, type, "Unknown", reason, message, observedGeneration);
}

function mark(target: Conditions, type: string, status: ConditionStatus, reason: string, message: string, observedGeneration: number | undefined): boolean {
  return setCondition(target, { type, status, reason, message, ...(observedGeneration === undefined ? {} : { observedGeneration }) });
}
