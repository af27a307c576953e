import type { Defaulter, Operation, Validator } from "./admission.js";
import type { MaybePromise } from "./context.js";
import type { Converter } from "./conversion.js";
import { FailurePolicy, Operation as OperationProto, type WebhookDescription } from "./gen/polyop/v1alpha1/admission_pb.js";
import { UpdateFilter as UpdateFilterProto, type CachedKind, type ControllerDescription, type IndexDescription } from "./gen/polyop/v1alpha1/describe_pb.js";
import { compilePath, OWNER_UID_INDEX, type CachedKindOptions, type IndexOptions } from "./indexes.js";
import { gvkOf, type GroupVersionKind, type KubeResource, type TypeMeta } from "./objects.js";
import type { Finalizer, ReconcileContext, Reconciler, Result } from "./reconcile.js";

// What a sidecar registers, checked and turned into the descriptions the host
// reads in Describe: the options of controllers, webhooks and conversions,
// and the Registry that keeps each with its handler.

/** Update events pass only if one of these changed, after controller-runtime's predicates. */
export type UpdateFilter = "GenerationChanged" | "LabelsChanged" | "AnnotationsChanged" | "DeletionChanged";

/** A kind of child a controller owns. Every option defaults to false. */
export interface OwnedKind extends TypeMeta {
  /** Send the observed children of this kind to each reconcile (ctx.observedChildren(kind)). */
  sendObserved?: boolean;
  /**
   * Let the host adopt an existing object of this kind that a desired child names and that no object controls (for
   * example a ConfigMap someone created by hand): it applies the child over it, which makes the reconciled object its
   * controller owner and merges the child's fields into it. An adopted object is a child like any other: it is pruned
   * (deleted) once it is no longer desired. When false (the default), the host refuses such an object: nothing is
   * written to it, the reconcile fails and a Warning event names the object. An object another object controls is
   * never adopted.
   */
  adopt?: boolean;
  /**
   * When the API server refuses to apply a child of this kind because it changes an immutable field (a Pod's spec, a
   * Job's spec.template), let the host delete the child (with its UID as a precondition) and apply it again, which
   * creates it. When false (the default), the child is left as it is, the reconcile fails and a Warning event names
   * the child and the field.
   */
  replaceOnImmutable?: boolean;
}

/** Another kind whose events enqueue reconciled objects: in the same namespace, named by a label, an annotation or a field of the reconciled object. */
export type WatchedKind = TypeMeta & ({ label: string } | { annotation: string } | { fieldPath: string });

/** How a controller is declared to the host. */
export interface ControllerOptions<T> {
  /** The reconciled kind. */
  for: TypeMeta;
  /** Unique within the sidecar: lower-case letters, digits, '-' and '.'. Defaults to the kind in lower case. */
  name?: string;
  /** Updates reconcile only when one of these changed. Defaults to every update, as controller-runtime. */
  updateFilters?: UpdateFilter[];
  /** Only objects matching this label selector (kubectl -l syntax) are watched. */
  labelSelector?: string;
  /** Only these namespaces are watched. Defaults to every namespace. */
  namespaces?: string[];
  /** How many objects are reconciled at once. Defaults to 1. */
  maxConcurrentReconciles?: number;
  owns?: OwnedKind[];
  watches?: WatchedKind[];
  /** A finalizer the host adds to every object; when one is being deleted, finalize is called instead of the reconciler. */
  finalizer?: string;
  finalize?: Finalizer<T>;
  /** Called when the object is gone (no finalizer held it). Defaults to doing nothing. */
  deleted?: (ctx: ReconcileContext) => MaybePromise<Result | void>;
  /**
   * Declares that the reconciler's answer depends on its inputs alone: the object without its status (and without
   * metadata.resourceVersion and metadata.managedFields) and the observed children sent (sendObserved), status
   * included. The host then skips a call whose inputs are those of the last answer that succeeded without
   * requeueAfter, such as the call its own status write or child apply would cause. Leave it off for a reconciler
   * that reads the clock, other objects or anything outside the cluster. Defaults to false: every reconcile calls.
   */
  skipUnchangedInputs?: boolean;
}

/** How an admission webhook is declared to the host. */
export interface WebhookOptions {
  /** The kind, at the version the webhook receives objects in. */
  for: TypeMeta;
  /** The resource (plural), when discovery should not be asked. */
  resource?: string;
  /** Defaults to CREATE and UPDATE. */
  operations?: Operation[];
  /** What the API server does when the webhook cannot answer. Defaults to "Fail". */
  failurePolicy?: "Fail" | "Ignore";
  /** The API server's timeout, 1 to 30 seconds. Defaults to 10. */
  timeoutSeconds?: number;
}

/** How a conversion is declared to the host. */
export interface ConversionOptions {
  group: string;
  kind: string;
  /** The versions converted between, any to any. */
  versions: string[];
}

/** A registered controller: its description and its handlers. */
export interface ControllerEntry {
  desc: ControllerDescription;
  gvk: GroupVersionKind;
  reconcile: Reconciler<KubeResource>;
  finalize: Finalizer<KubeResource> | undefined;
  deleted: ((ctx: ReconcileContext) => MaybePromise<Result | void>) | undefined;
  owned: Set<string>;
  /** The owned kinds declared with sendObserved. */
  observed: Set<string>;
}

/** A registered webhook of a kind: one description for its defaulter and validator. */
export interface WebhookEntry {
  desc: WebhookDescription;
  defaulter?: Defaulter<KubeResource>;
  validator?: Validator<KubeResource>;
}

const updateFilters: Record<UpdateFilter, UpdateFilterProto> = {
  GenerationChanged: UpdateFilterProto.GENERATION_CHANGED,
  LabelsChanged: UpdateFilterProto.LABELS_CHANGED,
  AnnotationsChanged: UpdateFilterProto.ANNOTATIONS_CHANGED,
  DeletionChanged: UpdateFilterProto.DELETION_CHANGED,
};

/** A registered conversion: its options and its converter. */
export interface ConversionEntry {
  desc: ConversionOptions;
  convert: Converter;
}

/** The wire's value of each operation. */
export const operations: Record<Operation, OperationProto> = {
  CREATE: OperationProto.CREATE,
  UPDATE: OperationProto.UPDATE,
  DELETE: OperationProto.DELETE,
  CONNECT: OperationProto.CONNECT,
};

/** The key of a kind in the registry's maps: "group/version/kind". */
export const kindKey = (gvk: GroupVersionKind) => `${gvk.group}/${gvk.version}/${gvk.kind}`;

/** Checks a kind given as apiVersion and kind and splits it. */
export function checkKind(type: TypeMeta | undefined, where: string): GroupVersionKind {
  if (!type?.apiVersion || !type.kind) {
    throw new Error(`${where}: a kind needs an apiVersion and a kind, got ${JSON.stringify(type)}`);
  }
  return gvkOf(type);
}


/**
 * What a sidecar registers: its controllers by name, its webhooks and
 * conversions by kind. Registration checks the options and builds the
 * descriptions; once the sidecar serves, the registry is sealed.
 */
export class Registry {
  readonly controllers = new Map<string, ControllerEntry>();
  readonly webhooks = new Map<string, WebhookEntry>();
  readonly conversions = new Map<string, ConversionEntry>();
  /** The declared indexes, by "group/kind/name". */
  readonly indexes = new Map<string, Omit<IndexDescription, "$typeName" | "kind"> & { kind: GroupVersionKind }>();
  /** The kinds declared for cached reads, by "group/kind". */
  readonly cachedKinds = new Map<string, Omit<CachedKind, "$typeName" | "kind"> & { kind: GroupVersionKind }>();
  /** Set while the sidecar serves: the host reads the registrations once, at start. */
  sealed = false;

  /** Nothing is registered. */
  get empty(): boolean {
    return this.controllers.size + this.webhooks.size + this.conversions.size === 0;
  }

  /** Adds a controller reconciling objects of options.for with fn. */
  addController<T extends KubeResource>(options: ControllerOptions<T>, fn: Reconciler<T>): void {
    const gvk = checkKind(options.for, "for");
    const name = options.name ?? gvk.kind.toLowerCase();
    const where = `polyop: controller ${JSON.stringify(name)}`;
    this.checkOpen(where);
    if (!/^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$/.test(name) || name.length > 253) {
      throw new Error(`${where}: a name is lower-case letters, digits, '-' and '.'`);
    }
    if (this.controllers.has(name)) {
      throw new Error(`${where} is already registered: give each controller a unique name`);
    }
    const max = options.maxConcurrentReconciles ?? 0;
    if (!Number.isInteger(max) || max < 0) {
      throw new Error(`${where}: maxConcurrentReconciles must be a whole number ≥ 0, got ${max}`);
    }
    if (Boolean(options.finalizer) !== Boolean(options.finalize)) {
      throw new Error(`${where}: a finalizer and a finalize function go together`);
    }
    const filters = [...new Set(options.updateFilters ?? [])].map((f) => {
      const value = updateFilters[f];
      if (value === undefined) {
        throw new Error(`${where}: ${JSON.stringify(f)} is not an update filter (${Object.keys(updateFilters).join(", ")})`);
      }
      return value;
    });
    const owns = (options.owns ?? []).map((o) => ({
      kind: checkKind(o, `${where}: owns`),
      sendObserved: o.sendObserved ?? false,
      adopt: o.adopt ?? false,
      replaceOnImmutable: o.replaceOnImmutable ?? false,
    }));
    const watches = (options.watches ?? []).map((w) => {
      const kind = checkKind(w, `${where}: watches`);
      const set = [
        { case: "label" as const, value: "label" in w ? w.label : "" },
        { case: "annotation" as const, value: "annotation" in w ? w.annotation : "" },
        { case: "fieldPath" as const, value: "fieldPath" in w ? w.fieldPath : "" },
      ].filter((m) => m.value);
      if (set.length !== 1) {
        throw new Error(`${where}: watching ${w.kind} needs exactly one of label, annotation or fieldPath`);
      }
      return { kind, mapping: set[0]! };
    });
    this.controllers.set(name, {
      desc: {
        $typeName: "polyop.v1alpha1.ControllerDescription",
        name,
        forKind: { $typeName: "polyop.v1alpha1.GroupVersionKind", ...gvk },
        predicates:
          filters.length || options.labelSelector
            ? { $typeName: "polyop.v1alpha1.Predicates", updateFilters: filters, labelSelector: options.labelSelector ?? "" }
            : undefined,
        namespaces: options.namespaces ?? [],
        maxConcurrentReconciles: max,
        owns: owns.map((o) => ({ $typeName: "polyop.v1alpha1.OwnedKind", ...o, kind: { $typeName: "polyop.v1alpha1.GroupVersionKind", ...o.kind } })),
        watches: watches.map((w) => ({
          $typeName: "polyop.v1alpha1.Watch",
          kind: { $typeName: "polyop.v1alpha1.GroupVersionKind", ...w.kind },
          mapping: w.mapping,
        })),
        finalizer: options.finalizer ?? "",
        skipUnchangedInputs: options.skipUnchangedInputs ?? false,
      },
      gvk,
      reconcile: fn as Reconciler<KubeResource>,
      finalize: options.finalize as Finalizer<KubeResource> | undefined,
      deleted: options.deleted,
      owned: new Set(owns.map((o) => kindKey(o.kind))),
      observed: new Set(owns.filter((o) => o.sendObserved).map((o) => kindKey(o.kind))),
    });
  }

  /** Adds a CRD conversion webhook for a kind's versions. */
  addConversion(options: ConversionOptions, fn: Converter): void {
    const where = `polyop: conversion of ${options.kind}.${options.group}`;
    this.checkOpen(where);
    if (!options.kind || options.versions.length < 2) {
      throw new Error(`${where}: needs a kind and at least two versions`);
    }
    const key = `${options.group}/${options.kind}`;
    if (this.conversions.has(key)) {
      throw new Error(`${where} is already registered`);
    }
    this.conversions.set(key, { desc: options, convert: fn });
  }

  /** Adds a declared index (see IndexOptions). */
  addIndex(options: IndexOptions): void {
    const gvk = checkKind(options, "polyop: index");
    const where = `polyop: index ${JSON.stringify(options.name)} on ${gvk.kind}`;
    this.checkOpen(where);
    if (!options.name || /[=!,\s]/.test(options.name)) {
      throw new Error(`${where}: a name is required, without '=', '!', ',' or spaces`);
    }
    if (options.name === OWNER_UID_INDEX) {
      throw new Error(`${where}: the host keeps this index itself on every owned kind; choose another name`);
    }
    if (Boolean(options.path) === Boolean(options.cel)) {
      throw new Error(`${where}: give path or cel, one of them`);
    }
    if (options.path) {
      compilePath(options.path); // an error now rather than at the host's start
    }
    const key = `${gvk.group}/${gvk.kind}/${options.name}`;
    if (this.indexes.has(key)) {
      throw new Error(`${where} is already declared`);
    }
    this.indexes.set(key, {
      kind: gvk,
      name: options.name,
      value: options.path ? { case: "fieldPath", value: options.path } : { case: "cel", value: options.cel ?? "" },
    });
  }

  /** Adds a kind declared for cached reads (see CachedKindOptions). */
  addCachedKind(options: CachedKindOptions): void {
    const gvk = checkKind(options, "polyop: cached kind");
    const where = `polyop: cached kind ${gvk.kind}`;
    this.checkOpen(where);
    for (const ns of options.namespaces ?? []) {
      if (!/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/.test(ns)) {
        throw new Error(`${where}: namespace ${JSON.stringify(ns)} is not a valid name`);
      }
    }
    const key = `${gvk.group}/${gvk.kind}`;
    if (this.cachedKinds.has(key)) {
      throw new Error(`${where} is already declared`);
    }
    this.cachedKinds.set(key, {
      kind: gvk,
      namespaces: [...new Set(options.namespaces ?? [])],
      labelSelector: options.labelSelector ?? "",
      fieldSelector: options.fieldSelector ?? "",
    });
  }

  private checkOpen(where: string) {
    if (this.sealed) {
      throw new Error(`${where}: register everything before serving: the host reads the registrations once, at start`);
    }
  }

  /** Adds the description of a defaulter or validator of options.for, merged with the other webhook of the kind; the caller sets its handler. */
  addWebhook(options: WebhookOptions, role: "defaulter" | "validator"): WebhookEntry {
    const gvk = checkKind(options.for, "for");
    const where = `polyop: ${role} of ${gvk.kind}`;
    this.checkOpen(where);
    const timeout = options.timeoutSeconds ?? 0;
    if (!Number.isInteger(timeout) || timeout < 0 || timeout > 30) {
      throw new Error(`${where}: timeoutSeconds must be a whole number from 1 to 30`);
    }
    const desc: WebhookDescription = {
      $typeName: "polyop.v1alpha1.WebhookDescription",
      kind: { $typeName: "polyop.v1alpha1.GroupVersionKind", ...gvk },
      resource: options.resource ?? "",
      default: false,
      validate: false,
      operations: (options.operations ?? []).map((op) => {
        if (operations[op] === undefined) {
          throw new Error(`${where}: ${JSON.stringify(op)} is not an operation (${Object.keys(operations).join(", ")})`);
        }
        return operations[op];
      }),
      failurePolicy: options.failurePolicy === "Ignore" ? FailurePolicy.IGNORE : options.failurePolicy === "Fail" ? FailurePolicy.FAIL : FailurePolicy.UNSPECIFIED,
      timeoutSeconds: timeout,
    };
    let entry = this.webhooks.get(kindKey(gvk));
    if (!entry) {
      entry = { desc };
      this.webhooks.set(kindKey(gvk), entry);
    } else {
      if (entry[role]) {
        throw new Error(`${where} is already registered`);
      }
      // One webhook description per kind: a defaulter and a validator share it.
      const merged = entry.desc;
      for (const field of ["resource", "failurePolicy", "timeoutSeconds"] as const) {
        if (desc[field] && merged[field] && desc[field] !== merged[field]) {
          throw new Error(`${where}: ${field} differs from the other webhook of the kind`);
        }
        (merged as Record<string, unknown>)[field] ||= desc[field];
      }
      if (desc.operations.length && merged.operations.length && desc.operations.join() !== merged.operations.join()) {
        throw new Error(`${where}: operations differ from the other webhook of the kind`);
      }
      if (!merged.operations.length) {
        merged.operations = desc.operations;
      }
    }
    entry.desc.default ||= role === "defaulter";
    entry.desc.validate ||= role === "validator";
    return entry;
  }
}
