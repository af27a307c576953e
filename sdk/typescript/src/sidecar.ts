import { create } from "@bufbuild/protobuf";
import type { Duration } from "@bufbuild/protobuf/wkt";
import { Code, ConnectError } from "@connectrpc/connect";

import { DEFAULT_ADDRESS } from "./address.js";
import { CLUSTER_ADDRESS_ENV, ClusterClient, type Cluster } from "./cluster.js";
import { DeniedError, TemporaryError, TerminalError } from "./errors.js";
import type { FieldError, FieldErrorType } from "./field.js";
import {
  ConvertResponseSchema,
  DefaultResponseSchema,
  FailurePolicy,
  FieldErrorType as FieldErrorTypeProto,
  Operation as OperationProto,
  ValidateResponseSchema,
  type AdmissionRequest,
  type ConvertRequest,
  type DefaultRequest,
  type Denial,
  type ValidateRequest,
  type WebhookDescription,
} from "./gen/polyop/v1alpha1/admission_pb.js";
import {
  DescribeResponseSchema,
  ProtocolVersion,
  UpdateFilter as UpdateFilterProto,
  type ControllerDescription,
  type DescribeRequest,
} from "./gen/polyop/v1alpha1/describe_pb.js";
import {
  EventType,
  FinalizeResponseSchema,
  ReconcileResponseSchema,
  type Event,
  type Failure,
  type FinalizeRequest,
  type ReconcileRequest,
  type ReconcileResponse,
} from "./gen/polyop/v1alpha1/reconcile_pb.js";
import { jsonLogger, type Logger } from "./log.js";
import {
  apiVersionOf,
  decodeJSON,
  encodeJSON,
  gvkOf,
  type GroupVersionKind,
  type KubeResource,
  type ObjectKey,
  type TypeMeta,
} from "./objects.js";
import { listen, type RunningServer } from "./serve.js";

/**
 * The version of the polyop protocol this SDK speaks, answered in Describe:
 * ProtocolVersion.V1ALPHA1 of the generated code.
 */
export const PROTOCOL_VERSION = ProtocolVersion.V1ALPHA1;

/** The SDK's name, answered in Describe (DescribeResponse.sdk_name) for the host's logs. */
export const SDK_NAME = "polyop-typescript";

/** The SDK's version, answered in Describe (DescribeResponse.sdk_version): the version of package.json. */
export const SDK_VERSION = "0.1.0";

/** Options of a Sidecar. */
export interface SidecarOptions {
  /**
   * A short name for the sidecar, for example "configmapsync-operator": the
   * host's logs, metrics and leader election lease name it. Lower-case
   * letters, digits and '-'. Required.
   */
  name: string;
  /** The largest gRPC message sent or received, in bytes; keep it in step with the host's --max-message-size. Defaults to 64 MiB. */
  maxMessageSize?: number;
  /** How long serve waits, once stopped, for the calls in flight, in milliseconds. Defaults to 30 seconds. */
  gracefulShutdownTimeoutMs?: number;
  /**
   * The address of the host's Cluster service. Defaults to the address the
   * host sends in its handshake, else the POLYOP_CLUSTER_ADDRESS environment
   * variable (which a restarted sidecar, whom the host does not greet again,
   * relies on).
   */
  clusterAddress?: string;
  /** The logger. Defaults to JSON lines on stderr at level info. */
  logger?: Logger;
}

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

/**
 * What a reconcile decides. Return nothing for "done, nothing to requeue".
 * A failure is thrown, not returned: TerminalError, TemporaryError, or any
 * other error for the exponential backoff.
 */
export interface Result {
  /** Reconcile again after this many milliseconds (and reset the backoff), as controller-runtime's RequeueAfter. */
  requeueAfter?: number;
  /** The desired children, of the owned kinds: the host applies them with server-side apply and owns them. */
  desiredChildren?: KubeResource[];
  /** desiredChildren is the complete set: the host deletes the owned children not in it. */
  childrenComplete?: boolean;
}

/** What a finalize decides. Return nothing when clean-up is done and the finalizer may go. */
export interface FinalizeResult {
  /** Clean-up waits on something: call finalize again after this many milliseconds, keeping the finalizer. */
  requeueAfter?: number;
}

/** What every handler gets beside its object. */
export interface CallContext {
  /** Aborted when the host's deadline passes or the host gives up on the call. */
  readonly signal: AbortSignal;
  /** A logger naming the call's object. */
  readonly log: Logger;
  /** The host's Cluster service, its calls bound to signal. Throws if no address is known. */
  readonly cluster: Cluster;
}

/** What a reconciler (and a finalizer) gets beside its object. */
export interface ReconcileContext extends CallContext {
  readonly controller: string;
  readonly kind: GroupVersionKind;
  readonly key: ObjectKey;
  /** How many times in a row this object has failed; 0 on a first attempt. */
  readonly retries: number;
  /**
   * The observed children of an owned kind declared with sendObserved: the
   * objects of that kind, from the host's cache, whose controller owner
   * reference points at the reconciled object. Throws for a kind the
   * controller does not own with sendObserved.
   */
  observedChildren<C extends KubeResource = KubeResource>(kind: TypeMeta): C[];
  /**
   * Records a Kubernetes Event on the object, through the host, once the call
   * returns: type, reason (CamelCase), message, then action (what was done;
   * defaults to the reason).
   */
  event(type: "Normal" | "Warning", reason: string, message: string, action?: string): void;
}

/** An admission operation. */
export type Operation = "CREATE" | "UPDATE" | "DELETE" | "CONNECT";

/** What a defaulter or validator gets beside its object. */
export interface AdmissionContext<T> extends CallContext {
  readonly uid: string;
  readonly kind: GroupVersionKind;
  readonly resource: string;
  /** The subresource, for example "status"; "" for the object itself. */
  readonly subresource: string;
  readonly key: ObjectKey;
  readonly operation: Operation;
  readonly userInfo: { username: string; uid: string; groups: string[]; extra: Record<string, string[]> };
  /** The request is a dry run: change nothing outside the answer. */
  readonly dryRun: boolean;
  /** The object before the request, on update and delete. */
  readonly oldObject: T | undefined;
  /** Returns a warning to the client (kubectl prints it). */
  warn(message: string): void;
}

type MaybePromise<T> = T | Promise<T>;
export type Reconciler<T> = (obj: T, ctx: ReconcileContext) => MaybePromise<Result | void>;
export type Finalizer<T> = (obj: T, ctx: ReconcileContext) => MaybePromise<FinalizeResult | void>;
/** Sets defaults on obj in place (or returns a new object). Throw DeniedError to refuse. */
export type Defaulter<T> = (obj: T, ctx: AdmissionContext<T>) => MaybePromise<T | void>;
/** Returns the field errors (none: allowed). Throw DeniedError to refuse with a message. On delete, obj is the old object. */
export type Validator<T> = (obj: T, ctx: AdmissionContext<T>) => MaybePromise<FieldError[] | void>;
/** Converts obj to desiredApiVersion and returns it. */
export type Converter = (obj: KubeResource, desiredApiVersion: string, ctx: CallContext) => MaybePromise<KubeResource>;

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

interface ControllerEntry {
  desc: ControllerDescription;
  gvk: GroupVersionKind;
  reconcile: Reconciler<KubeResource>;
  finalize: Finalizer<KubeResource> | undefined;
  deleted: ((ctx: ReconcileContext) => MaybePromise<Result | void>) | undefined;
  owned: Set<string>;
  /** The owned kinds declared with sendObserved. */
  observed: Set<string>;
}

interface WebhookEntry {
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

const operations: Record<Operation, OperationProto> = {
  CREATE: OperationProto.CREATE,
  UPDATE: OperationProto.UPDATE,
  DELETE: OperationProto.DELETE,
  CONNECT: OperationProto.CONNECT,
};

const fieldErrorTypes: Record<FieldErrorType, FieldErrorTypeProto> = {
  Invalid: FieldErrorTypeProto.INVALID,
  Required: FieldErrorTypeProto.REQUIRED,
  NotSupported: FieldErrorTypeProto.NOT_SUPPORTED,
  Forbidden: FieldErrorTypeProto.FORBIDDEN,
  Duplicate: FieldErrorTypeProto.DUPLICATE,
  TooLong: FieldErrorTypeProto.TOO_LONG,
  TooShort: FieldErrorTypeProto.TOO_SHORT,
  TooMany: FieldErrorTypeProto.TOO_MANY,
  TooFew: FieldErrorTypeProto.TOO_FEW,
  NotFound: FieldErrorTypeProto.NOT_FOUND,
  TypeInvalid: FieldErrorTypeProto.TYPE_INVALID,
  Internal: FieldErrorTypeProto.INTERNAL,
};

const kindKey = (gvk: GroupVersionKind) => `${gvk.group}/${gvk.version}/${gvk.kind}`;

/**
 * A polyop sidecar: register reconcilers, defaulters, validators and
 * converters, then serve. What the host learns through Describe is built from
 * the registrations and nothing else.
 *
 *     const sidecar = new Sidecar({ name: "widget-operator" });
 *     sidecar.reconciler<Widget>({ for: { apiVersion: "example.com/v1", kind: "Widget" } }, async (widget, ctx) => {
 *       widget.status = { ready: true };
 *       return { requeueAfter: 60_000 };
 *     });
 *     await sidecar.serve("unix:///var/run/polyop/sidecar.sock", { signal: shutdownSignal() });
 */
export class Sidecar {
  readonly name: string;
  readonly log: Logger;
  readonly maxMessageSize: number;
  readonly gracefulShutdownTimeoutMs: number;

  private readonly controllers = new Map<string, ControllerEntry>();
  private readonly webhooks = new Map<string, WebhookEntry>();
  private readonly conversions = new Map<string, { desc: ConversionOptions; convert: Converter }>();
  private readonly clusterAddressOption: string | undefined;
  private hostClusterAddress = "";
  private clusterClient: ClusterClient | undefined;
  private clusterOverride: Cluster | undefined;
  private serving = false;

  constructor(options: SidecarOptions) {
    if (!/^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/.test(options.name ?? "")) {
      throw new Error(`polyop: the sidecar name ${JSON.stringify(options.name)} must be lower-case letters, digits and '-', at most 63`);
    }
    this.name = options.name;
    this.log = options.logger ?? jsonLogger({ name: "sidecar" });
    this.maxMessageSize = options.maxMessageSize ?? 64 << 20;
    this.gracefulShutdownTimeoutMs = options.gracefulShutdownTimeoutMs ?? 30_000;
    this.clusterAddressOption = options.clusterAddress;
  }

  /** Registers a controller reconciling objects of options.for with fn. */
  reconciler<T extends KubeResource>(options: ControllerOptions<T>, fn: Reconciler<T>): this {
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
      },
      gvk,
      reconcile: fn as Reconciler<KubeResource>,
      finalize: options.finalize as Finalizer<KubeResource> | undefined,
      deleted: options.deleted,
      owned: new Set(owns.map((o) => kindKey(o.kind))),
      observed: new Set(owns.filter((o) => o.sendObserved).map((o) => kindKey(o.kind))),
    });
    return this;
  }

  /** Registers a mutating admission webhook for options.for. */
  defaulter<T extends KubeResource>(options: WebhookOptions, fn: Defaulter<T>): this {
    this.webhook(options, "defaulter").defaulter = fn as unknown as Defaulter<KubeResource>;
    return this;
  }

  /** Registers a validating admission webhook for options.for. */
  validator<T extends KubeResource>(options: WebhookOptions, fn: Validator<T>): this {
    this.webhook(options, "validator").validator = fn as unknown as Validator<KubeResource>;
    return this;
  }

  /** Registers a CRD conversion webhook for a kind's versions. */
  converter(options: ConversionOptions, fn: Converter): this {
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
    return this;
  }

  /**
   * Uses cluster for ctx.cluster and Sidecar.cluster instead of dialing the
   * host, for example polyop's FakeCluster in tests.
   */
  useCluster(cluster: Cluster): this {
    this.clusterOverride = cluster;
    return this;
  }

  /**
   * The host's Cluster service, at the address from the options, the host's
   * handshake or POLYOP_CLUSTER_ADDRESS, in that order. Throws if none is
   * known.
   */
  get cluster(): Cluster {
    if (this.clusterOverride) {
      return this.clusterOverride;
    }
    const address = this.clusterAddressOption || this.hostClusterAddress || process.env[CLUSTER_ADDRESS_ENV] || "";
    if (!address) {
      throw new Error(
        `polyop: the address of the host's Cluster service is unknown: the host sent none, and ${CLUSTER_ADDRESS_ENV} is not set`,
      );
    }
    if (this.clusterClient?.address !== address) {
      this.clusterClient?.close();
      this.clusterClient = new ClusterClient(address, { maxMessageSize: this.maxMessageSize });
    }
    return this.clusterClient;
  }

  /** The sidecar's self-description, as Describe answers it. */
  describe() {
    return create(DescribeResponseSchema, {
      protocolVersion: PROTOCOL_VERSION,
      name: this.name,
      controllers: [...this.controllers.values()].map((c) => c.desc),
      webhooks: [...this.webhooks.values()].map((w) => w.desc),
      conversions: [...this.conversions.values()].map(({ desc }) => ({
        kind: { group: desc.group, kind: desc.kind },
        versions: desc.versions,
      })),
      sdkName: SDK_NAME,
      sdkVersion: SDK_VERSION,
    });
  }

  /**
   * Listens on address and serves until the returned server is stopped. Next
   * to SidecarService it serves grpc.health.v1.Health, SERVING while it serves.
   */
  async listen(address: string = DEFAULT_ADDRESS): Promise<RunningServer> {
    if (this.controllers.size + this.webhooks.size + this.conversions.size === 0) {
      throw new Error("polyop: nothing is registered: register a reconciler, defaulter, validator or converter before serving");
    }
    if (this.serving) {
      throw new Error("polyop: the sidecar is already serving");
    }
    this.serving = true;
    try {
      return await listen(this, address);
    } catch (err) {
      this.serving = false;
      throw err;
    }
  }

  /**
   * Serves on address until signal aborts, then stops gracefully: health
   * reports NOT_SERVING, new calls are refused, calls in flight finish (at
   * most gracefulShutdownTimeoutMs). Resolves once stopped.
   */
  async serve(address: string = DEFAULT_ADDRESS, options: { signal?: AbortSignal } = {}): Promise<void> {
    const server = await this.listen(address);
    const stop = () => void server.stop();
    if (options.signal?.aborted) {
      stop();
    }
    options.signal?.addEventListener("abort", stop, { once: true });
    try {
      await server.closed;
    } finally {
      options.signal?.removeEventListener("abort", stop);
      this.clusterClient?.close();
    }
  }

  /**
   * The implementation of polyop.v1alpha1.SidecarService, as Connect's
   * router takes it; the test harness in "@polyop/sidecar/testing" calls it
   * directly.
   */
  readonly service = {
    describe: (req: DescribeRequest) => {
      if (req.protocolVersion !== PROTOCOL_VERSION) {
        this.log.info("The host speaks another protocol version; answering anyway, the host decides", {
          hostProtocolVersion: ProtocolVersion[req.protocolVersion] ?? req.protocolVersion,
          protocolVersion: ProtocolVersion[PROTOCOL_VERSION],
        });
      }
      this.hostClusterAddress = req.clusterAddress;
      this.log.info("Described the sidecar to the host", { hostVersion: req.hostVersion, clusterAddress: req.clusterAddress });
      return this.describe();
    },
    reconcile: (req: ReconcileRequest, call: { signal: AbortSignal }) => this.reconcile(req, call.signal),
    finalize: (req: FinalizeRequest, call: { signal: AbortSignal }) => this.finalize(req, call.signal),
    default: (req: DefaultRequest, call: { signal: AbortSignal }) => this.default(req, call.signal),
    validate: (req: ValidateRequest, call: { signal: AbortSignal }) => this.validate(req, call.signal),
    convert: (req: ConvertRequest, call: { signal: AbortSignal }) => this.convert(req, call.signal),
  };

  private checkOpen(where: string) {
    if (this.serving) {
      throw new Error(`${where}: register everything before serving: the host reads the registrations once, at start`);
    }
  }

  private webhook(options: WebhookOptions, role: "defaulter" | "validator"): WebhookEntry {
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

  /** The Cluster for a call: bound to its signal when it is the host's. */
  private clusterFor(signal: AbortSignal): Cluster {
    const cluster = this.cluster;
    return cluster instanceof ClusterClient ? cluster.withSignal(signal) : cluster;
  }

  private callContext(signal: AbortSignal, log: Logger): CallContext {
    const sidecar = this;
    return {
      signal,
      log,
      get cluster() {
        return sidecar.clusterFor(signal);
      },
    };
  }

  private reconcileContext(
    req: ReconcileRequest | FinalizeRequest,
    entry: ControllerEntry,
    signal: AbortSignal,
    observed: KubeResource[],
  ): { ctx: ReconcileContext; events: Event[] } {
    const kind = req.kind?.kind ? { group: req.kind.group, version: req.kind.version, kind: req.kind.kind } : entry.gvk;
    const key = { namespace: req.key?.namespace ?? "", name: req.key?.name ?? "" };
    const log = this.log.child({
      controller: req.controller,
      kind: kind.kind,
      namespace: key.namespace,
      name: key.name,
      ...(req.retries ? { retries: req.retries } : {}),
    });
    const events: Event[] = [];
    const sidecar = this;
    const ctx: ReconcileContext = {
      signal,
      log,
      get cluster() {
        return sidecar.clusterFor(signal);
      },
      controller: req.controller,
      kind,
      key,
      retries: req.retries,
      observedChildren<C extends KubeResource = KubeResource>(type: TypeMeta): C[] {
        const want = kindKey(checkKind(type, `controller ${JSON.stringify(req.controller)}: observedChildren`));
        if (!entry.observed.has(want)) {
          throw new Error(
            `controller ${JSON.stringify(req.controller)} is sent no observed children of ${type.kind} (${type.apiVersion}): declare it in owns with sendObserved: true`,
          );
        }
        return observed.filter((c) => kindKey(gvkOf({ apiVersion: c.apiVersion ?? "", kind: c.kind ?? "" })) === want) as C[];
      },
      event(type, reason, message, action = "") {
        events.push({
          $typeName: "polyop.v1alpha1.Event",
          type: type === "Warning" ? EventType.WARNING : type === "Normal" ? EventType.NORMAL : EventType.UNSPECIFIED,
          reason,
          message,
          action,
        });
      },
    };
    return { ctx, events };
  }

  private controller(req: { controller: string; key?: { name: string } }, method: "Reconcile" | "Finalize"): ControllerEntry {
    if (this.controllers.size === 0) {
      throw new ConnectError(`sidecar ${JSON.stringify(this.name)} registers no controller: it serves no ${method}`, Code.Unimplemented);
    }
    const entry = this.controllers.get(req.controller);
    if (!entry) {
      throw new ConnectError(
        `sidecar ${JSON.stringify(this.name)} has no controller named ${JSON.stringify(req.controller)}; it has ${JSON.stringify([...this.controllers.keys()])}`,
        Code.NotFound,
      );
    }
    if (!req.key?.name) {
      throw new ConnectError(`controller ${JSON.stringify(req.controller)}: the request has no object name`, Code.InvalidArgument);
    }
    return entry;
  }

  private async reconcile(req: ReconcileRequest, signal: AbortSignal): Promise<ReconcileResponse> {
    const entry = this.controller(req, "Reconcile");
    const observed = req.observedChildren.map((c) => decode<KubeResource>(c, `controller ${req.controller}: an observed child`));
    const { ctx, events } = this.reconcileContext(req, entry, signal, observed);
    if (req.object.length === 0) {
      if (!entry.deleted) {
        ctx.log.debug("The object is gone and the controller has no deleted handler; nothing to do");
        return create(ReconcileResponseSchema);
      }
      const resp = await outcome(ctx, () => entry.deleted!(ctx));
      return resp; // status, events and children of a gone object are ignored by the host
    }
    const obj = decode<KubeResource>(req.object, `controller ${req.controller}: the object`);
    checkKey(obj, ctx.key, req.controller);
    const resp = await outcome(ctx, () => entry.reconcile(obj, ctx));
    const status = (obj as { status?: unknown }).status;
    if (status !== undefined && status !== null) {
      resp.status = encodeJSON(status);
    }
    resp.events = events;
    for (const child of resp.desiredChildren) {
      const { apiVersion, kind } = decodeJSON<TypeMeta>(child);
      if (!entry.owned.has(kindKey(gvkOf({ apiVersion: apiVersion ?? "", kind: kind ?? "" })))) {
        resp.error ??= failure(
          `a desired child is a ${kind} (${apiVersion}), which controller ${JSON.stringify(req.controller)} does not declare in owns`,
          { terminal: true },
        );
        resp.desiredChildren = [];
        resp.childrenComplete = false;
        break;
      }
    }
    return resp;
  }

  private async finalize(req: FinalizeRequest, signal: AbortSignal) {
    const entry = this.controller(req, "Finalize");
    if (!entry.finalize) {
      if (![...this.controllers.values()].some((c) => c.finalize)) {
        throw new ConnectError(`sidecar ${JSON.stringify(this.name)} declares no finalizer: it serves no Finalize`, Code.Unimplemented);
      }
      throw new ConnectError(`controller ${JSON.stringify(req.controller)} declares no finalizer`, Code.NotFound);
    }
    const { ctx, events } = this.reconcileContext(req, entry, signal, []);
    const obj = decode<KubeResource>(req.object, `controller ${req.controller}: the object`);
    checkKey(obj, ctx.key, req.controller);
    const resp = await outcome(ctx, () => entry.finalize!(obj, ctx));
    return create(FinalizeResponseSchema, { requeueAfter: resp.requeueAfter, error: resp.error, events });
  }

  private admission(req: AdmissionRequest | undefined, role: "defaulter" | "validator", signal: AbortSignal) {
    if (!req) {
      throw new ConnectError("the request carries no AdmissionRequest", Code.InvalidArgument);
    }
    const gvk = { group: req.kind?.group ?? "", version: req.kind?.version ?? "", kind: req.kind?.kind ?? "" };
    const entry = this.webhooks.get(kindKey(gvk));
    if (!entry?.[role]) {
      const method = role === "defaulter" ? "Default" : "Validate";
      if (![...this.webhooks.values()].some((w) => w[role])) {
        throw new ConnectError(`sidecar ${JSON.stringify(this.name)} registers no ${role}: it serves no ${method}`, Code.Unimplemented);
      }
      throw new ConnectError(`sidecar ${JSON.stringify(this.name)} has no ${role} for ${gvk.kind} (${apiVersionOf(gvk)})`, Code.NotFound);
    }
    const key = { namespace: req.key?.namespace ?? "", name: req.key?.name ?? "" };
    const operation = (Object.keys(operations) as Operation[]).find((op) => operations[op] === req.operation) ?? "CREATE";
    const log = this.log.child({ webhook: role, kind: gvk.kind, namespace: key.namespace, name: key.name, operation, uid: req.uid });
    const oldObject = req.oldObject.length ? decode<KubeResource>(req.oldObject, "the old object") : undefined;
    const warnings: string[] = [];
    const sidecar = this;
    const ctx: AdmissionContext<KubeResource> = {
      signal,
      log,
      get cluster() {
        return sidecar.clusterFor(signal);
      },
      uid: req.uid,
      kind: gvk,
      resource: req.resource,
      subresource: req.subresource,
      key,
      operation,
      userInfo: {
        username: req.userInfo?.username ?? "",
        uid: req.userInfo?.uid ?? "",
        groups: req.userInfo?.groups ?? [],
        extra: Object.fromEntries(Object.entries(req.userInfo?.extra ?? {}).map(([k, v]) => [k, v.values])),
      },
      dryRun: req.dryRun,
      oldObject,
      warn: (message) => void warnings.push(message),
    };
    return { entry, ctx, warnings, log, request: req };
  }

  private async default(req: DefaultRequest, signal: AbortSignal) {
    const { entry, ctx, warnings, log, request } = this.admission(req.request, "defaulter", signal);
    const fn = entry.defaulter!;
    const sent = request.object;
    const obj = decode<KubeResource>(sent, "the object");
    try {
      const defaulted = (await fn(obj, ctx)) ?? obj;
      const data = encodeJSON(defaulted);
      const unchanged = data.length === sent.length && data.every((b, i) => b === sent[i]);
      return create(DefaultResponseSchema, { object: unchanged ? new Uint8Array() : data, warnings });
    } catch (err) {
      throwIfCutOff(signal);
      return create(DefaultResponseSchema, { denied: denial(err, log), warnings });
    }
  }

  private async validate(req: ValidateRequest, signal: AbortSignal) {
    const { entry, ctx, warnings, log, request } = this.admission(req.request, "validator", signal);
    const fn = entry.validator!;
    const obj = request.object.length ? decode<KubeResource>(request.object, "the object") : ctx.oldObject;
    if (!obj) {
      throw new ConnectError("the request carries no object", Code.InvalidArgument);
    }
    try {
      const errors = (await fn(obj, ctx)) ?? [];
      if (errors.length) {
        throw new DeniedError("", errors);
      }
      return create(ValidateResponseSchema, { warnings });
    } catch (err) {
      throwIfCutOff(signal);
      return create(ValidateResponseSchema, { denied: denial(err, log), warnings });
    }
  }

  private async convert(req: ConvertRequest, signal: AbortSignal) {
    if (this.conversions.size === 0) {
      throw new ConnectError(`sidecar ${JSON.stringify(this.name)} registers no converter: it serves no Convert`, Code.Unimplemented);
    }
    const log = this.log.child({ conversion: req.desiredApiVersion, uid: req.uid });
    const ctx = this.callContext(signal, log);
    const objects = req.objects.map((data) => {
      const obj = decode<KubeResource>(data, "an object");
      const { group, kind } = gvkOf({ apiVersion: obj.apiVersion ?? "", kind: obj.kind ?? "" });
      const conversion = this.conversions.get(`${group}/${kind}`);
      if (!conversion) {
        throw new ConnectError(`sidecar ${JSON.stringify(this.name)} has no converter for ${kind}${group ? `.${group}` : ""}`, Code.NotFound);
      }
      return { data, obj, conversion };
    });
    try {
      const converted = [];
      for (const { data, obj, conversion } of objects) {
        if (obj.apiVersion === req.desiredApiVersion) {
          converted.push(data);
          continue;
        }
        const out = await conversion.convert(obj, req.desiredApiVersion, ctx);
        if (out.apiVersion !== req.desiredApiVersion) {
          throw new Error(`converting ${obj.kind} ${obj.metadata.name} to ${req.desiredApiVersion} returned apiVersion ${out.apiVersion}`);
        }
        converted.push(encodeJSON(out));
      }
      return create(ConvertResponseSchema, { objects: converted });
    } catch (err) {
      log.error("Conversion failed", { error: err });
      return create(ConvertResponseSchema, { error: err instanceof Error ? err.message : String(err) });
    }
  }
}

/** Checks a kind given as apiVersion and kind and splits it. */
function checkKind(type: TypeMeta | undefined, where: string): GroupVersionKind {
  if (!type?.apiVersion || !type.kind) {
    throw new Error(`${where}: a kind needs an apiVersion and a kind, got ${JSON.stringify(type)}`);
  }
  return gvkOf(type);
}

function decode<T>(data: Uint8Array, what: string): T {
  try {
    const value = decodeJSON<T>(data);
    if (typeof value !== "object" || value === null || Array.isArray(value)) {
      throw new Error("not a JSON object");
    }
    return value;
  } catch (err) {
    throw new ConnectError(`decoding ${what}: ${err instanceof Error ? err.message : String(err)}`, Code.InvalidArgument);
  }
}

function checkKey(obj: KubeResource, key: ObjectKey, controller: string) {
  obj.metadata ??= {};
  if ((obj.metadata.name ?? "") !== key.name || (obj.metadata.namespace ?? "") !== (key.namespace ?? "")) {
    throw new ConnectError(
      `controller ${JSON.stringify(controller)}: the object is ${obj.metadata.namespace ?? ""}/${obj.metadata.name ?? ""}, but the request is for ${key.namespace}/${key.name}`,
      Code.InvalidArgument,
    );
  }
}

/** Runs a reconciler, finalizer or deleted handler and turns its outcome into a response. */
async function outcome(ctx: ReconcileContext, fn: () => MaybePromise<Result | FinalizeResult | void>): Promise<ReconcileResponse> {
  const resp = create(ReconcileResponseSchema);
  let result: Result;
  try {
    result = (await fn()) ?? {};
  } catch (err) {
    const terminal = err instanceof TerminalError;
    const retryAfter = err instanceof TemporaryError ? err.retryAfter : undefined;
    // The host logs the error it receives; logging it here too would show it twice.
    ctx.log.debug("Reconciler error", { error: err, terminal, ...(retryAfter ? { retryAfter } : {}) });
    resp.error = failure(err instanceof Error ? err.message : String(err), { terminal, retryAfter });
    return resp;
  }
  const after = result.requeueAfter ?? 0;
  if (!Number.isFinite(after) || after < 0) {
    resp.error = failure(`requeueAfter must be a duration ≥ 0 in milliseconds, got ${after}`, { terminal: true });
    return resp;
  }
  resp.requeueAfter = duration(after);
  resp.desiredChildren = (result.desiredChildren ?? []).map((c) => encodeJSON(c));
  resp.childrenComplete = result.childrenComplete ?? false;
  return resp;
}

/** A Failure: terminal, or retried after retryAfter milliseconds, or (neither) with the controller's backoff. */
function failure(message: string, { terminal = false, retryAfter }: { terminal?: boolean; retryAfter?: number | undefined }): Failure {
  return { $typeName: "polyop.v1alpha1.Failure", message, terminal, retryAfter: retryAfter ? duration(retryAfter) : undefined };
}

/** A Duration of ms milliseconds (rounded up to the millisecond); undefined for none. */
function duration(ms: number): Duration | undefined {
  if (!(ms > 0)) {
    return undefined;
  }
  const whole = Math.ceil(ms);
  return { $typeName: "google.protobuf.Duration", seconds: BigInt(Math.floor(whole / 1000)), nanos: (whole % 1000) * 1_000_000 };
}

/** The denial of a defaulter or validator that threw. */
/**
 * Throws the call's own end once signal has aborted (the host's deadline
 * passed: DEADLINE_EXCEEDED; the host cancelled: CANCELLED). A handler that
 * fails after that was cut off: its error is no denial, and the host reports
 * the sidecar as not answering in time.
 */
function throwIfCutOff(signal: AbortSignal): void {
  if (signal.aborted) {
    throw signal.reason instanceof ConnectError ? signal.reason : new ConnectError("the call was cancelled", Code.Canceled);
  }
}

function denial(err: unknown, log: Logger): Denial {
  if (!(err instanceof DeniedError)) {
    log.error("Admission handler error; denying", { error: err });
  }
  const fieldErrors = err instanceof DeniedError ? err.fieldErrors : [];
  return {
    $typeName: "polyop.v1alpha1.Denial",
    message: err instanceof Error ? err.message : String(err),
    code: err instanceof DeniedError ? err.code : 0,
    reason: err instanceof DeniedError ? err.reason : "",
    fieldErrors: fieldErrors.map((e) => ({
      $typeName: "polyop.v1alpha1.FieldError",
      field: e.field,
      type: fieldErrorTypes[e.type] ?? FieldErrorTypeProto.INVALID,
      badValue: e.badValue === undefined ? new Uint8Array() : encodeJSON(e.badValue),
      detail: e.detail ?? "",
    })),
  };
}

/** A Result that reconciles again after ms milliseconds. */
export function requeueAfter(ms: number): Result {
  return { requeueAfter: ms };
}

/**
 * A Result declaring children as the complete set of desired children: the
 * host applies them and deletes the owned children not among them.
 */
export function childrenComplete(children: KubeResource[], result: Omit<Result, "desiredChildren" | "childrenComplete"> = {}): Result {
  return { ...result, desiredChildren: children, childrenComplete: true };
}
