import type { Defaulter, FieldErrorValidator, Operation, Validator } from "./admission.js";
import type { Converter } from "./conversion.js";
import type { DefinedKind } from "./crd.js";
import { FailurePolicy, Operation as OperationProto, type WebhookDescription } from "./gen/polyop/v1alpha1/admission_pb.js";
import { UpdateFilter as UpdateFilterProto, type CachedKind, type ControllerDescription, type IndexDescription } from "./gen/polyop/v1alpha1/describe_pb.js";
import { compilePath, OWNER_UID_INDEX, type CachedKindOptions, type DeclaredKind, type IndexOptions } from "./indexes.js";
import { kindKey, kindOf, modelOf, type KindRef } from "./kinds.js";
import type { GroupVersionKind, KubeResource, TypeMeta } from "./objects.js";
import type { DeletedHandler, Finalizer, Reconciler } from "./reconcile.js";

// What a sidecar registers, checked and turned into the descriptions the host
// reads in Describe: the options of controllers, webhooks and conversions,
// and the Registry that keeps each with its handler. The registry knows
// nothing of how it is served: dispatch reads it, and the Sidecar serves it.

/** Update events pass only if one of these changed, after controller-runtime's predicates. */
export type UpdateFilter = "GenerationChanged" | "LabelsChanged" | "AnnotationsChanged" | "DeletionChanged";

/**
 * A kind of child a controller owns, as kind info with its options. Every
 * option defaults to false. An owned kind without options may also be given
 * in any form of KindRef (a kubernetes-models class such as Deployment, or
 * "apps/v1/Deployment").
 */
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
export interface ControllerOptions<T = KubeResource> {
  /** The reconciled kind: a defineKind model (which types the reconciler's object), kind info, or "group/version/Kind". */
  for: KindRef;
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
  owns?: Array<OwnedKind | KindRef>;
  watches?: WatchedKind[];
  /**
   * The name of a finalizer the host adds to every object, for example
   * "example.com/cleanup"; when one is being deleted, the handler registered
   * with Sidecar.finalizer for the kind is called instead of the reconciler.
   */
  finalizer?: string;
  /** @deprecated Register the handler with Sidecar.finalizer(kind, fn); name the finalizer here, in finalizer. */
  finalize?: Finalizer<T>;
  /** @deprecated Register the handler with Sidecar.deleted(kind, fn). */
  deleted?: DeletedHandler;
  /**
   * Declares that the reconciler's answer depends on its inputs alone: the object without its status (and without
   * metadata.resourceVersion and metadata.managedFields) and the observed children sent (sendObserved), status
   * included. The host then skips a call whose inputs are those of the last answer that succeeded without
   * requeueAfter, such as the call its own status write or child apply would cause. Leave it off for a reconciler
   * that reads the clock, other objects or anything outside the cluster. Defaults to false: every reconcile calls.
   */
  skipUnchangedInputs?: boolean;
}

/** Options of Sidecar.finalizer. */
export interface FinalizerOptions {
  /** Only for the controller of this name. Defaults to every controller of the kind that names a finalizer. */
  controller?: string;
}

/** How an admission webhook is declared to the host. */
export interface WebhookOptions {
  /**
   * The kind, at the version the webhook receives objects in: a defineKind
   * model (which types the handler's object, and checks it: an object the
   * model refuses is denied with its field errors before the handler runs),
   * kind info, or "group/version/Kind".
   */
  for: KindRef;
  /** The resource (plural), when discovery should not be asked. */
  resource?: string;
  /** Defaults to CREATE and UPDATE. */
  operations?: Operation[];
  /** What the API server does when the webhook cannot answer. Defaults to "Fail". */
  failurePolicy?: "Fail" | "Ignore";
  /** The API server's timeout, 1 to 30 seconds. Defaults to 10. */
  timeoutSeconds?: number;
}

/**
 * How a conversion is declared to the host: the kind, in any form of KindRef
 * (its version does not matter), or its group and kind, and the versions
 * converted between, any to any.
 */
export type ConversionOptions = { versions: string[] } & ({ for: KindRef; group?: never; kind?: never } | { group: string; kind: string; for?: never });

/** A registered controller: its description and its handlers. */
export interface ControllerEntry {
  desc: ControllerDescription;
  gvk: GroupVersionKind;
  reconcile: Reconciler<KubeResource>;
  /** The finalize handler given in the options (deprecated); see Registry.finalizerOf. */
  finalize: Finalizer<KubeResource> | undefined;
  /** The deleted handler given in the options (deprecated); see Registry.deletedOf. */
  deleted: DeletedHandler | undefined;
  owned: Set<string>;
  /** The owned kinds declared with sendObserved. */
  observed: Set<string>;
}

/** A registered webhook of a kind: one description for its defaulter and validator. */
export interface WebhookEntry {
  desc: WebhookDescription;
  defaulter?: Defaulter<KubeResource>;
  validator?: Validator<KubeResource> | FieldErrorValidator<KubeResource>;
  /** The defineKind model the kind was registered with: objects are checked against it. */
  model?: DefinedKind;
}

const updateFilters: Record<UpdateFilter, UpdateFilterProto> = {
  GenerationChanged: UpdateFilterProto.GENERATION_CHANGED,
  LabelsChanged: UpdateFilterProto.LABELS_CHANGED,
  AnnotationsChanged: UpdateFilterProto.ANNOTATIONS_CHANGED,
  DeletionChanged: UpdateFilterProto.DELETION_CHANGED,
};

/** A registered conversion: its options and its converter. */
export interface ConversionEntry {
  desc: { group: string; kind: string; versions: string[] };
  convert: Converter;
}

/** The wire's value of each operation. */
export const operations: Record<Operation, OperationProto> = {
  CREATE: OperationProto.CREATE,
  UPDATE: OperationProto.UPDATE,
  DELETE: OperationProto.DELETE,
  CONNECT: OperationProto.CONNECT,
};

/** The kind of an index's or cached kind's options: their for, or the kind info spread into them. */
function declaredKind(options: DeclaredKind, where: string): GroupVersionKind {
  return kindOf(options.for ?? options, where);
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
  /** The finalize handlers, by kind (kindKey), or by kind and controller ("kindKey#name"). */
  readonly finalizers = new Map<string, Finalizer<KubeResource>>();
  /** The deleted handlers, by kind (kindKey). */
  readonly deletedHandlers = new Map<string, DeletedHandler>();
  /** Set while the sidecar serves: the host reads the registrations once, at start. */
  sealed = false;

  /** Nothing is registered. */
  get empty(): boolean {
    return this.controllers.size + this.webhooks.size + this.conversions.size === 0;
  }

  /** Adds a controller reconciling objects of options.for with fn. */
  addController<T>(options: ControllerOptions<T>, fn: Reconciler<T>): void {
    const gvk = kindOf(options.for, "for");
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
    if (options.finalize && !options.finalizer) {
      throw new Error(`${where}: a finalize function needs the finalizer's name, in finalizer`);
    }
    const filters = [...new Set(options.updateFilters ?? [])].map((f) => {
      const value = updateFilters[f];
      if (value === undefined) {
        throw new Error(`${where}: ${JSON.stringify(f)} is not an update filter (${Object.keys(updateFilters).join(", ")})`);
      }
      return value;
    });
    const owns = (options.owns ?? []).map((o) => {
      const flags: Partial<OwnedKind> = typeof o === "object" && o !== null ? o : {};
      return {
        kind: kindOf(o, `${where}: owns`),
        sendObserved: flags.sendObserved ?? false,
        adopt: flags.adopt ?? false,
        replaceOnImmutable: flags.replaceOnImmutable ?? false,
      };
    });
    const watches = (options.watches ?? []).map((w) => {
      const kind = kindOf(w, `${where}: watches`);
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
      reconcile: fn as unknown as Reconciler<KubeResource>,
      // The deprecated handlers in the options still work.
      finalize: options.finalize as unknown as Finalizer<KubeResource> | undefined,
      deleted: options.deleted,
      owned: new Set(owns.map((o) => kindKey(o.kind))),
      observed: new Set(owns.filter((o) => o.sendObserved).map((o) => kindKey(o.kind))),
    });
  }

  /** Adds a CRD conversion webhook for a kind's versions. */
  addConversion(options: ConversionOptions, fn: Converter): void {
    const { group, kind } = options.for !== undefined ? kindOf(options.for, "polyop: conversion") : { group: options.group ?? "", kind: options.kind ?? "" };
    const where = `polyop: conversion of ${kind}.${group}`;
    this.checkOpen(where);
    if (!kind || (options.versions ?? []).length < 2) {
      throw new Error(`${where}: needs a kind and at least two versions`);
    }
    const key = `${group}/${kind}`;
    if (this.conversions.has(key)) {
      throw new Error(`${where} is already registered`);
    }
    this.conversions.set(key, { desc: { group, kind, versions: options.versions }, convert: fn });
  }

  /**
   * Registers the finalize handler of the controllers reconciling kind (of
   * the one named controller, when given); each names its finalizer in its
   * options (finalizer).
   */
  addFinalizer(kind: KindRef, fn: Finalizer<KubeResource>, controller?: string): void {
    const gvk = kindOf(kind, "polyop: finalizer");
    const where = `polyop: finalizer of ${gvk.kind}${controller ? ` for controller ${JSON.stringify(controller)}` : ""}`;
    this.checkOpen(where);
    const key = controller ? `${kindKey(gvk)}#${controller}` : kindKey(gvk);
    if (this.finalizers.has(key)) {
      throw new Error(`${where} is already registered`);
    }
    this.finalizers.set(key, fn);
  }

  /** Registers the handler called when a reconciled object of kind is gone. */
  addDeleted(kind: KindRef, fn: DeletedHandler): void {
    const gvk = kindOf(kind, "polyop: deleted");
    const where = `polyop: deleted handler of ${gvk.kind}`;
    this.checkOpen(where);
    if (this.deletedHandlers.has(kindKey(gvk))) {
      throw new Error(`${where} is already registered`);
    }
    this.deletedHandlers.set(kindKey(gvk), fn);
  }

  /** The finalize handler of a controller: registered for its kind, or given in its options. */
  finalizerOf(entry: ControllerEntry): Finalizer<KubeResource> | undefined {
    if (!entry.desc.finalizer) {
      return undefined;
    }
    return this.finalizers.get(`${kindKey(entry.gvk)}#${entry.desc.name}`) ?? this.finalizers.get(kindKey(entry.gvk)) ?? entry.finalize;
  }

  /** The deleted handler of a controller: registered for its kind, or given in its options. */
  deletedOf(entry: ControllerEntry): DeletedHandler | undefined {
    return this.deletedHandlers.get(kindKey(entry.gvk)) ?? entry.deleted;
  }

  /**
   * Checks what only the whole set of registrations tells: every controller
   * naming a finalizer has its handler, and every finalize handler a
   * controller naming its finalizer. Describe calls it.
   */
  check(): void {
    const controllers = [...this.controllers.values()];
    for (const c of controllers) {
      if (c.desc.finalizer && !this.finalizerOf(c)) {
        throw new Error(
          `polyop: controller ${JSON.stringify(c.desc.name)}: a finalizer and its handler go together: it names the finalizer ${JSON.stringify(c.desc.finalizer)}, but no handler is registered; register one with sidecar.finalizer(${JSON.stringify(`${c.gvk.group ? `${c.gvk.group}/` : ""}${c.gvk.version}/${c.gvk.kind}`)}, fn)`,
        );
      }
    }
    for (const key of this.finalizers.keys()) {
      const [kind, name] = key.split("#");
      if (!controllers.some((c) => c.desc.finalizer && kindKey(c.gvk) === kind && (name === undefined || c.desc.name === name))) {
        throw new Error(
          `polyop: a finalizer and its handler go together: a handler is registered for ${key.split("/").pop()}, but no controller of the kind names its finalizer; set finalizer in the controller's options`,
        );
      }
    }
    for (const key of this.deletedHandlers.keys()) {
      if (!controllers.some((c) => kindKey(c.gvk) === key)) {
        throw new Error(`polyop: a deleted handler is registered for ${key.split("/").pop()} but no controller reconciles the kind`);
      }
    }
  }

  /** Adds a declared index (see IndexOptions). */
  addIndex(options: IndexOptions): void {
    const gvk = declaredKind(options, "polyop: index");
    const where = `polyop: index ${JSON.stringify(options.name)} on ${gvk.kind}`;
    this.checkOpen(where);
    if (!options.name || /[=!,\s]/.test(options.name)) {
      throw new Error(`${where}: a name is required, without '=', '!', ',' or spaces`);
    }
    if (options.name === OWNER_UID_INDEX) {
      throw new Error(`${where}: the host keeps this index itself on every owned kind; choose another name`);
    }
    // path is the deprecated name of fieldPath.
    const fieldPath = options.fieldPath ?? options.path;
    if (Boolean(fieldPath) === Boolean(options.cel)) {
      throw new Error(`${where}: give fieldPath or cel, one of them`);
    }
    if (fieldPath) {
      compilePath(fieldPath); // an error now rather than at the host's start
    }
    const key = `${gvk.group}/${gvk.kind}/${options.name}`;
    if (this.indexes.has(key)) {
      throw new Error(`${where} is already declared`);
    }
    this.indexes.set(key, {
      kind: gvk,
      name: options.name,
      value: fieldPath ? { case: "fieldPath", value: fieldPath } : { case: "cel", value: options.cel ?? "" },
    });
  }

  /** Adds a kind declared for cached reads (see CachedKindOptions). */
  addCachedKind(options: CachedKindOptions): void {
    const gvk = declaredKind(options, "polyop: cached kind");
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
    const gvk = kindOf(options.for, "for");
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
    const model = modelOf(options.for);
    if (!entry) {
      entry = { desc, ...(model ? { model } : {}) };
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
    entry.model ??= model;
    entry.desc.default ||= role === "defaulter";
    entry.desc.validate ||= role === "validator";
    return entry;
  }
}
