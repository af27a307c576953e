/**
 * Test a sidecar without a host: Harness calls its reconcilers, finalizers,
 * defaulters, validators and converters through the same code path the
 * host's gRPC calls take (requests and responses go through protobuf
 * encoding too), and FakeCluster is an in-memory Cluster.
 *
 *     const cluster = new FakeCluster([sourceConfigMap]);
 *     const harness = new Harness(newSidecar().useCluster(cluster));
 *     const out = await harness.reconcile(sync);
 *     assert.equal(out.status?.conditions?.[0]?.status, "True");
 */
import { randomUUID } from "node:crypto";
import { createServer, type ServerHttp2Session } from "node:http2";

import { create, fromBinary, toBinary, type DescMessage, type MessageInitShape, type MessageShape } from "@bufbuild/protobuf";
import type { Duration } from "@bufbuild/protobuf/wkt";
import { Code, ConnectError } from "@connectrpc/connect";
import { connectNodeAdapter } from "@connectrpc/connect-node";

import { parseAddress, prepareSocket } from "./address.js";

import type { WatchEvent, WatchOptions } from "./watch.js";
import type { Cluster, DeleteOptions, EventSpec, GetOptions, ListOptions, ObjectList, PatchOptions, PatchType, ResolvedKind, UpdateOptions, WriteOptions } from "./cluster.js";
import { AlreadyExistsError, BadRequestError, ClusterError, ConflictError, InvalidError, NotFoundError, type Status } from "./errors.js";
import type { FieldError, FieldErrorType } from "./field.js";
import {
  ConvertRequestSchema,
  ConvertResponseSchema,
  DefaultRequestSchema,
  DefaultResponseSchema,
  FieldErrorType as FieldErrorTypeProto,
  Operation as OperationProto,
  ValidateRequestSchema,
  ValidateResponseSchema,
  type Denial,
} from "./gen/polyop/v1alpha1/admission_pb.js";
import {
  EventType,
  FinalizeRequestSchema,
  FinalizeResponseSchema,
  ReconcileRequestSchema,
  ReconcileResponseSchema,
  type Event,
  type Failure,
} from "./gen/polyop/v1alpha1/reconcile_pb.js";
import { APIErrorSchema, ClusterService, DeletePropagation, PatchType as PatchTypeProto, ReadSource, WatchEventType } from "./gen/polyop/v1alpha1/cluster_pb.js";
import { kindOf, typeMetaOf, type KindRef, type ObjectOf, type TypedKindRef } from "./kinds.js";
import { apiVersionOf, decodeJSON, encodeJSON, gvkOf, keyOf, type KubeResource, type Manifest, type ObjectKey, type TypeMeta } from "./objects.js";
import type { Operation } from "./admission.js";
import type { Sidecar } from "./sidecar.js";
import { compilePath, controlledBy, OWNER_UID_INDEX } from "./indexes.js";

/** The failure a reconcile or finalize reported (the wire's Failure), decoded. */
export interface FailureOutcome {
  message: string;
  /** A TerminalError: not retried. */
  terminal: boolean;
  /** A TemporaryError's retryAfter, in milliseconds; present only when set. */
  retryAfter?: number;
}

/** What one reconcile answered, decoded. */
export interface ReconcileOutcome<Status> {
  /** The status the sidecar sent; undefined for none. */
  status: Status | undefined;
  /** The requeue delay in milliseconds; undefined for none. */
  requeueAfter: number | undefined;
  /** The failure the sidecar reported; undefined on success. */
  error: FailureOutcome | undefined;
  events: EventSpec[];
  desiredChildren: KubeResource[];
  childrenComplete: boolean;
}

/** What one admission call answered, decoded. */
export interface AdmissionOutcome<T> {
  /** The object after defaulting (for Default), as the host would patch it. */
  object: T;
  allowed: boolean;
  /** The denial; code and reason appear only when the denial set them. */
  denied: { message: string; fieldErrors: FieldError[]; code?: number; reason?: string } | undefined;
  warnings: string[];
}

/**
 * Options of an admission call: what the API server's AdmissionReview says
 * beside the object. Everything defaults as for a plain create by "tester".
 */
export interface AdmissionCallOptions<T> {
  /** Defaults to "UPDATE" with old, "CREATE" without. */
  operation?: Operation;
  /** The object before the request (AdmissionRequest.old_object), for an update; on delete, the object deleted. */
  old?: T;
  /** A dry run (kubectl --dry-run=server). Defaults to false. */
  dryRun?: boolean;
  /** The subresource written, for example "status". Defaults to "", the object itself. */
  subresource?: string;
  /** The requesting user. Defaults to { username: "tester" }. */
  user?: { username?: string; uid?: string; groups?: string[]; extra?: Record<string, string[]> };
}

/** Options of a reconcile or finalize call. */
export interface ReconcileCallOptions {
  /** The controller's name. Defaults to the one controller registered for the object's kind. */
  controller?: string;
  /** How many times in a row the object has failed (ctx.retries). Defaults to 0. */
  retries?: number;
  /** The observed children sent with the request (ctx.observedChildren). Defaults to none. */
  observedChildren?: KubeResource[];
  /** Aborts the call as the host's deadline would. */
  signal?: AbortSignal;
}

/** Calls a Sidecar's functions as the host would, in process. */
export class Harness {
  constructor(readonly sidecar: Sidecar) {}

  /** Reconciles obj with the controller registered for its kind (or options.controller). */
  async reconcile<T extends KubeResource & { status?: unknown }>(
    obj: T,
    options: ReconcileCallOptions = {},
  ): Promise<ReconcileOutcome<NonNullable<T["status"]>>> {
    const resp = await roundTrip(ReconcileRequestSchema, ReconcileResponseSchema, this.request(obj, options), (req) =>
      this.sidecar.service.reconcile(req, { signal: options.signal ?? new AbortController().signal }),
    );
    return {
      status: resp.status.length ? decodeJSON(resp.status) : undefined,
      requeueAfter: milliseconds(resp.requeueAfter),
      error: failure(resp.error),
      events: resp.events.map(eventSpec),
      desiredChildren: resp.desiredChildren.map((c) => decodeJSON<KubeResource>(c)),
      childrenComplete: resp.childrenComplete,
    };
  }

  /** Tells the controller that the object at key is gone (its deleted handler runs, if it has one). */
  async reconcileDeleted(type: TypeMeta, key: ObjectKey, options: { controller?: string } = {}) {
    const gvk = gvkOf(type);
    const resp = await roundTrip(
      ReconcileRequestSchema,
      ReconcileResponseSchema,
      { controller: options.controller ?? this.controllerFor(type), kind: gvk, key: { namespace: key.namespace ?? "", name: key.name } },
      (req) => this.sidecar.service.reconcile(req, { signal: new AbortController().signal }),
    );
    return { error: failure(resp.error), requeueAfter: milliseconds(resp.requeueAfter) };
  }

  /** Finalizes obj, which should carry a deletionTimestamp, as the host does for an object being deleted. */
  async finalize(obj: KubeResource, options: Omit<ReconcileCallOptions, "observedChildren"> = {}) {
    const resp = await roundTrip(FinalizeRequestSchema, FinalizeResponseSchema, this.request(obj, options), (req) =>
      this.sidecar.service.finalize(req, { signal: options.signal ?? new AbortController().signal }),
    );
    return { requeueAfter: milliseconds(resp.requeueAfter), error: failure(resp.error), events: resp.events.map(eventSpec) };
  }

  /** Calls the defaulter of obj's kind; the outcome's object is obj with the defaults. */
  async default<T extends KubeResource>(obj: T, options: AdmissionCallOptions<T> = {}): Promise<AdmissionOutcome<T>> {
    const resp = await roundTrip(DefaultRequestSchema, DefaultResponseSchema, { request: admissionRequest(obj, options) }, (req) =>
      this.sidecar.service.default(req, { signal: new AbortController().signal }),
    );
    return {
      object: resp.object.length ? decodeJSON<T>(resp.object) : obj,
      allowed: !resp.denied,
      denied: denied(resp.denied),
      warnings: resp.warnings,
    };
  }

  /** Calls the validator of obj's kind. */
  async validate<T extends KubeResource>(obj: T, options: AdmissionCallOptions<T> = {}): Promise<AdmissionOutcome<T>> {
    const resp = await roundTrip(ValidateRequestSchema, ValidateResponseSchema, { request: admissionRequest(obj, options) }, (req) =>
      this.sidecar.service.validate(req, { signal: new AbortController().signal }),
    );
    return { object: obj, allowed: !resp.denied, denied: denied(resp.denied), warnings: resp.warnings };
  }

  /** Converts objects to desiredApiVersion; throws the sidecar's error. */
  async convert(objects: KubeResource[], desiredApiVersion: string): Promise<KubeResource[]> {
    const resp = await roundTrip(
      ConvertRequestSchema,
      ConvertResponseSchema,
      { uid: randomUUID(), desiredApiVersion, objects: objects.map((o) => encodeJSON(o)) },
      (req) => this.sidecar.service.convert(req, { signal: new AbortController().signal }),
    );
    if (resp.error) {
      throw new Error(resp.error);
    }
    return resp.objects.map((o) => decodeJSON<KubeResource>(o));
  }

  private request(obj: KubeResource, options: ReconcileCallOptions) {
    return {
      controller: options.controller ?? this.controllerFor(obj),
      kind: gvkOf(obj),
      key: keyOf(obj),
      object: encodeJSON(obj),
      retries: options.retries ?? 0,
      observedChildren: (options.observedChildren ?? []).map((c) => encodeJSON(c)),
    };
  }

  private controllerFor(type: TypeMeta): string {
    const gvk = gvkOf(type);
    const names = this.sidecar
      .describe()
      .controllers.filter((c) => c.forKind?.group === gvk.group && c.forKind.version === gvk.version && c.forKind.kind === gvk.kind)
      .map((c) => c.name);
    if (names.length !== 1) {
      throw new Error(`${names.length} controllers reconcile ${type.apiVersion} ${type.kind}: name one with options.controller`);
    }
    return names[0]!;
  }
}

/** Encodes a request, calls fn with it decoded, and does the same with the response, as the wire would. */
async function roundTrip<I extends DescMessage, O extends DescMessage>(
  input: I,
  output: O,
  init: MessageInitShape<I>,
  fn: (req: MessageShape<I>) => Promise<MessageShape<O>> | MessageShape<O>,
): Promise<MessageShape<O>> {
  const req = fromBinary(input, toBinary(input, create(input, init)));
  return fromBinary(output, toBinary(output, await fn(req)));
}

function milliseconds(d: Duration | undefined): number | undefined {
  return d ? Number(d.seconds) * 1000 + d.nanos / 1e6 : undefined;
}

function failure(f: Failure | undefined): FailureOutcome | undefined {
  if (!f) {
    return undefined;
  }
  const retryAfter = milliseconds(f.retryAfter);
  return { message: f.message, terminal: f.terminal, ...(retryAfter ? { retryAfter } : {}) };
}

function eventSpec(e: Event): EventSpec {
  return { type: e.type === EventType.WARNING ? "Warning" : "Normal", reason: e.reason, message: e.message, ...(e.action ? { action: e.action } : {}) };
}

const fieldErrorTypes = Object.fromEntries(
  Object.entries(FieldErrorTypeProto)
    .filter(([, v]) => typeof v === "number")
    .map(([k, v]) => [v, k.toLowerCase().replace(/(^|_)(\w)/g, (_, __, c: string) => c.toUpperCase())]),
) as Record<number, FieldErrorType>;

function denied(d: Denial | undefined) {
  if (!d) {
    return undefined;
  }
  return {
    message: d.message,
    fieldErrors: d.fieldErrors.map((e) => ({
      field: e.field,
      type: fieldErrorTypes[e.type] ?? "Invalid",
      ...(e.badValue.length ? { badValue: decodeJSON<unknown>(e.badValue) } : {}),
      ...(e.detail ? { detail: e.detail } : {}),
    })),
    ...(d.code ? { code: d.code } : {}),
    ...(d.reason ? { reason: d.reason } : {}),
  };
}

function admissionRequest<T extends KubeResource>(obj: T, options: AdmissionCallOptions<T>) {
  const operation = options.operation ?? (options.old ? "UPDATE" : "CREATE");
  const user = options.user ?? { username: "tester" };
  return {
    uid: randomUUID(),
    kind: gvkOf(obj),
    resource: `${obj.kind.toLowerCase()}s`,
    subresource: options.subresource ?? "",
    key: keyOf(obj),
    operation: OperationProto[operation],
    userInfo: {
      username: user.username ?? "",
      uid: user.uid ?? "",
      groups: user.groups ?? [],
      extra: Object.fromEntries(Object.entries(user.extra ?? {}).map(([k, values]) => [k, { values }])),
    },
    object: operation === "DELETE" ? new Uint8Array() : encodeJSON(obj),
    oldObject: options.old ? encodeJSON(options.old) : operation === "DELETE" ? encodeJSON(obj) : new Uint8Array(),
    dryRun: options.dryRun ?? false,
  };
}

/** A recorded call to FakeCluster.recordEvent. */
export interface RecordedEvent extends EventSpec {
  object: TypeMeta & ObjectKey;
}

/**
 * An in-memory Cluster for tests, after controller-runtime's fake client:
 * objects get a uid, a resourceVersion and a generation; create refuses
 * existing objects (AlreadyExistsError), update and delete missing ones
 * (NotFoundError), update a stale resourceVersion (ConflictError). List
 * selects by namespace, by equality label selectors ("a=b,c!=d,e,!f") and by
 * the field selectors metadata.name and metadata.namespace (=, ==, !=), or
 * one "<index>=<value>" on OWNER_UID_INDEX or an index given to index or
 * indexAs, as the host's cache does; another field selector is refused.
 * watch delivers the stored objects, "synced", then every change made
 * through it (or seed), as the host's Watch stream does.
 * Patches are merge patches (apply is treated as one). Every call passes
 * through the interceptors first, which may throw to inject failures.
 */
export class FakeCluster implements Cluster {
  /** The events recorded, in order. */
  readonly events: RecordedEvent[] = [];
  /** The subresources created (createSubresource), in order. */
  readonly subresources: Array<TypeMeta & ObjectKey & { subresource: string; body: object }> = [];
  /** Called before every operation; throw to make it fail. */
  readonly interceptors: Array<(verb: string, type: TypeMeta, key: ObjectKey | undefined) => void> = [];
  private readonly store = new Map<string, KubeResource>();
  private readonly indexes = new Map<string, (obj: KubeResource) => string[]>();
  /** The open watches, told of every change: the object before and after (undefined when absent). */
  private readonly watchers = new Set<(before: KubeResource | undefined, after: KubeResource | undefined) => void>();
  private version = 0;

  constructor(objects: Manifest[] = []) {
    for (const obj of objects) {
      this.seed(obj);
    }
  }

  /** Stores obj as is (with a uid and resourceVersion when it has none), without interceptors. */
  seed(obj: Manifest): void {
    const copy = withMetadata(clone(obj));
    copy.metadata.uid ??= randomUUID();
    copy.metadata.resourceVersion = String(++this.version);
    copy.metadata.generation ??= 1;
    this.put(copy);
  }

  /**
   * Indexes a kind by name, as the host indexes what a sidecar declares with
   * Sidecar.index: list then selects fieldSelector "<name>=<value>". values
   * is a field path (the host's syntax) or a function of the object returning
   * its values, for an index declared by CEL, which FakeCluster does not
   * evaluate.
   */
  index(kind: KindRef, name: string, values: string | ((obj: KubeResource) => Iterable<string>)): this {
    const gvk = kindOf(kind, "FakeCluster.index");
    const fn = typeof values === "string" ? compilePath(values) : (o: KubeResource) => [...new Set(values(o))].filter(Boolean);
    this.indexes.set(`${gvk.group}/${gvk.kind}/${name}`, fn);
    return this;
  }

  /**
   * Indexes this cluster by the indexes sidecar declares: by their field
   * paths; one declared by CEL refuses a List until the test gives it a
   * function with index.
   */
  indexAs(sidecar: Sidecar): this {
    for (const ix of sidecar.declaredIndexes) {
      if (ix.fieldPath) {
        this.index(ix, ix.name, ix.fieldPath);
        continue;
      }
      const gvk = gvkOf(ix);
      const key = `${gvk.group}/${gvk.kind}/${ix.name}`;
      if (!this.indexes.has(key)) {
        this.indexes.set(key, () => {
          throw apiError(
            BadRequestError,
            400,
            "BadRequest",
            `FakeCluster does not evaluate the CEL of index ${JSON.stringify(ix.name)} on ${gvk.kind} (${ix.cel}): ` +
              `give it the index as a function, fake.index({ apiVersion: ${JSON.stringify(ix.apiVersion)}, kind: ${JSON.stringify(ix.kind)} }, ${JSON.stringify(ix.name)}, (obj) => [...])`,
          );
        });
      }
    }
    return this;
  }

  /** The test of a field selector, as the host's cache answers it. */
  private fieldTest(type: TypeMeta, selector: string): (obj: KubeResource) => boolean {
    if (!selector.trim()) {
      return () => true;
    }
    const gvk = gvkOf(type);
    const one = /^\s*([^=!,\s]+)\s*==?\s*([^,\s]*)\s*$/.exec(selector);
    if (one) {
      const [, name, value] = one as unknown as [string, string, string];
      if (name === OWNER_UID_INDEX) {
        return (o) => controlledBy(o, value);
      }
      const fn = this.indexes.get(`${gvk.group}/${gvk.kind}/${name}`);
      if (fn) {
        return (o) => fn(o).includes(value);
      }
    }
    const tests = selector.split(",").map((part) => {
      const m = /^\s*(metadata\.name|metadata\.namespace)\s*(==|!=|=)\s*(\S*)\s*$/.exec(part);
      if (!m) {
        throw apiError(
          BadRequestError,
          400,
          "BadRequest",
          `FakeCluster selects ${gvk.kind} by metadata.name, metadata.namespace and its indexes only, not ${JSON.stringify(part.trim())}: index the field with index or indexAs`,
        );
      }
      const [, field, op, value] = m as unknown as [string, string, string, string];
      return (o: KubeResource) => ((field === "metadata.name" ? o.metadata.name : o.metadata.namespace) === value) !== (op === "!=");
    });
    return (o) => tests.every((t) => t(o));
  }

  /** Every stored object of the kind, sorted by namespace and name. */
  all<K extends TypedKindRef>(kind: K): Array<ObjectOf<K>>;
  all<T extends Manifest = KubeResource>(kind: KindRef): T[];
  all<T extends Manifest>(kind: KindRef): T[] {
    const type = typeMetaOf(kind, "FakeCluster.all");
    return [...this.store.values()]
      .filter((o) => o.apiVersion === type.apiVersion && o.kind === type.kind)
      .sort((a, b) => storeKey(a, keyOf(a)).localeCompare(storeKey(b, keyOf(b))))
      .map((o) => clone(o) as unknown as T);
  }

  private intercept(verb: string, type: TypeMeta, key?: ObjectKey) {
    for (const fn of this.interceptors) {
      fn(verb, type, key);
    }
  }

  private find(type: TypeMeta, key: ObjectKey): KubeResource {
    const obj = this.store.get(storeKey(type, key));
    if (!obj) {
      throw apiError(NotFoundError, 404, "NotFound", `${resourceOf(type)} "${key.name}" not found`);
    }
    return obj;
  }

  get<K extends TypedKindRef>(kind: K, key: ObjectKey, options?: GetOptions): Promise<ObjectOf<K>>;
  get<T extends Manifest = KubeResource>(kind: KindRef, key: ObjectKey, options?: GetOptions): Promise<T>;
  async get<T extends Manifest>(kind: KindRef, key: ObjectKey, options?: GetOptions): Promise<T> {
    const type = typeMetaOf(kind, "FakeCluster.get");
    const subresource = options?.subresource ?? "";
    this.intercept(subresource ? `get/${subresource}` : "get", type, key);
    const obj = this.find(type, key);
    if (subresource && subresource !== "status") {
      throw apiError(NotFoundError, 404, "NotFound", `the FakeCluster has no ${subresource} subresource of ${resourceOf(type)}`);
    }
    return clone(obj) as unknown as T;
  }

  list<K extends TypedKindRef>(kind: K, options?: ListOptions): Promise<ObjectList<ObjectOf<K>>>;
  list<T extends Manifest = KubeResource>(kind: KindRef, options?: ListOptions): Promise<ObjectList<T>>;
  async list<T extends Manifest>(kind: KindRef, options: ListOptions = {}): Promise<ObjectList<T>> {
    const type = typeMetaOf(kind, "FakeCluster.list");
    this.intercept("list", type);
    const selector = parseSelector(options.labelSelector ?? "");
    const fields = this.fieldTest(type, options.fieldSelector ?? "");
    const items = this.all<KubeResource>(type).filter(
      (o) => (!options.namespace || o.metadata.namespace === options.namespace) && selector(o.metadata.labels ?? {}) && fields(o),
    );
    return { items: items as unknown as T[], continue: "", resourceVersion: String(this.version), source: "cache" };
  }

  async create<T extends Manifest>(obj: T, options: WriteOptions = {}): Promise<T> {
    this.intercept("create", obj, keyOf(obj));
    if (!obj.metadata?.name) {
      throw apiError(InvalidError, 422, "Invalid", `${obj.kind} is invalid: metadata.name: Required value`);
    }
    if (this.store.has(storeKey(obj, keyOf(obj)))) {
      throw apiError(AlreadyExistsError, 409, "AlreadyExists", `${resourceOf(obj)} "${obj.metadata.name}" already exists`);
    }
    const copy = clone(obj) as unknown as KubeResource;
    copy.metadata = { ...copy.metadata, uid: randomUUID(), resourceVersion: String(++this.version), generation: 1, creationTimestamp: new Date().toISOString().replace(/\.\d+Z$/, "Z") };
    if (!options.dryRun) {
      this.put(copy);
    }
    return clone(copy) as unknown as T;
  }

  /**
   * Records the subresource created in subresources. An "eviction" of a Pod
   * deletes it and answers a Status, as the API server does for a Pod not
   * protected by a disruption budget; any other subresource answers body.
   */
  async createSubresource<T extends TypeMeta = TypeMeta>(
    kind: KindRef,
    key: ObjectKey,
    subresource: string,
    body: object,
    options: WriteOptions = {},
  ): Promise<T> {
    const type = typeMetaOf(kind, "FakeCluster.createSubresource");
    this.intercept(`create/${subresource}`, type, key);
    this.find(type, key);
    this.subresources.push({ apiVersion: type.apiVersion, kind: type.kind, ...key, subresource, body: clone(body) });
    if (subresource === "eviction" && type.apiVersion === "v1" && type.kind === "Pod") {
      if (!options.dryRun) {
        this.remove(type, key);
      }
      return { apiVersion: "v1", kind: "Status", status: "Success", code: 201 } as unknown as T;
    }
    return clone(body) as T;
  }

  async update<T extends Manifest>(obj: T, options: UpdateOptions = {}): Promise<T> {
    this.intercept(options.subresource ? `update/${options.subresource}` : "update", obj, keyOf(obj));
    const current = this.find(obj, keyOf(obj));
    if (obj.metadata?.resourceVersion && obj.metadata.resourceVersion !== current.metadata.resourceVersion) {
      throw apiError(
        ConflictError,
        409,
        "Conflict",
        `Operation cannot be fulfilled on ${resourceOf(obj)} "${obj.metadata.name}": the object has been modified; please apply your changes to the latest version and try again`,
      );
    }
    return this.write(current, withMetadata(clone(obj)), options) as unknown as T;
  }

  async patch<T extends Manifest = KubeResource>(kind: KindRef, key: ObjectKey, patch: unknown, options: PatchOptions): Promise<T> {
    const type = typeMetaOf(kind, "FakeCluster.patch");
    this.intercept(`patch/${options.type}`, type, key);
    if (options.type === "json" || options.type === "strategic") {
      throw new ClusterError(`FakeCluster does not apply ${options.type} patches`, Code.Unimplemented);
    }
    const body: unknown = typeof patch === "string" ? JSON.parse(patch) : patch instanceof Uint8Array ? decodeJSON(patch) : patch;
    if (options.type === "apply" && !this.store.has(storeKey(type, key))) {
      return this.create(body as T, options);
    }
    const current = this.find(type, key);
    return this.write(current, mergePatch(clone(current), body) as KubeResource, options) as unknown as T;
  }

  apply<T extends Manifest>(obj: T, options: UpdateOptions & { force?: boolean } = {}): Promise<T> {
    return this.patch<T>(obj, keyOf(obj), obj, { ...options, type: "apply" });
  }

  async delete(kind: KindRef, key: ObjectKey, options: DeleteOptions = {}): Promise<void> {
    const type = typeMetaOf(kind, "FakeCluster.delete");
    this.intercept("delete", type, key);
    const current = this.find(type, key);
    if (options.preconditions?.uid && options.preconditions.uid !== current.metadata.uid) {
      throw apiError(ConflictError, 409, "Conflict", `precondition failed: UID in precondition: ${options.preconditions.uid}, UID in object meta: ${current.metadata.uid}`);
    }
    if (!options.dryRun) {
      this.remove(type, key);
    }
  }

  async recordEvent(obj: Manifest, event: EventSpec): Promise<void> {
    this.intercept("recordEvent", obj, keyOf(obj));
    this.events.push({ ...event, object: { apiVersion: obj.apiVersion, kind: obj.kind, ...keyOf(obj) } });
  }

  async resolveKind(kind: KindRef): Promise<ResolvedKind> {
    const type = typeMetaOf(kind, "FakeCluster.resolveKind");
    this.intercept("resolveKind", type);
    return { ...type, resource: resourceOf(type), namespaced: type.kind !== "Namespace" };
  }

  /** The number of watches open: a watch whose loop broke, or whose signal aborted, is no longer counted. */
  get watchCount(): number {
    return this.watchers.size;
  }

  /**
   * Watches the objects of a kind, as the host's Watch stream does: the
   * stored objects that match, each "added", then "synced", then every
   * change made through this FakeCluster (or seed); an object leaving the
   * selection is "deleted", one entering it "added". The stream never breaks,
   * so there is nothing to resume.
   */
  watch<K extends TypedKindRef>(kind: K, options?: WatchOptions): AsyncGenerator<WatchEvent<ObjectOf<K>>, void, undefined>;
  watch<T extends Manifest = KubeResource>(kind: KindRef, options?: WatchOptions): AsyncGenerator<WatchEvent<T>, void, undefined>;
  async *watch<T extends Manifest>(kind: KindRef, options: WatchOptions = {}): AsyncGenerator<WatchEvent<T>, void, undefined> {
    const type = typeMetaOf(kind, "FakeCluster.watch");
    this.intercept("watch", type);
    const { signal } = options;
    const labels = parseSelector(options.labelSelector ?? "");
    const fields = this.fieldTest(type, options.fieldSelector ?? "");
    const match = (o: KubeResource | undefined): o is KubeResource =>
      o !== undefined &&
      o.apiVersion === type.apiVersion &&
      o.kind === type.kind &&
      (!options.namespace || o.metadata.namespace === options.namespace) &&
      labels(o.metadata.labels ?? {}) &&
      fields(o);
    // The list and the subscription together, with no await between them:
    // no change falls in between, and none comes twice.
    const queue: Array<WatchEvent<T>> = this.all<KubeResource>(type)
      .filter(match)
      .map((object) => ({ type: "added" as const, object: object as unknown as T }));
    queue.push({ type: "synced" });
    let wake: (() => void) | undefined;
    const listener = (before: KubeResource | undefined, after: KubeResource | undefined) => {
      const was = match(before);
      if (match(after)) {
        queue.push({ type: was ? "modified" : "added", object: clone(after) as unknown as T });
      } else if (was) {
        queue.push({ type: "deleted", object: clone(after ?? before) as unknown as T });
      } else {
        return;
      }
      wake?.();
    };
    const abort = () => wake?.();
    this.watchers.add(listener);
    signal?.addEventListener("abort", abort);
    try {
      while (!signal?.aborted) {
        const next = queue.shift();
        if (next) {
          yield next;
          continue;
        }
        await new Promise<void>((resolve) => (wake = resolve));
        wake = undefined;
      }
    } finally {
      this.watchers.delete(listener);
      signal?.removeEventListener("abort", abort);
    }
  }

  /** Stores obj and tells the watches. */
  private put(obj: KubeResource): void {
    const key = storeKey(obj, keyOf(obj));
    const before = this.store.get(key);
    this.store.set(key, obj);
    for (const watcher of this.watchers) {
      watcher(before, obj);
    }
  }

  /** Removes the object at key and tells the watches. */
  private remove(type: TypeMeta, key: ObjectKey): void {
    const k = storeKey(type, key);
    const before = this.store.get(k);
    this.store.delete(k);
    for (const watcher of this.watchers) {
      watcher(before, undefined);
    }
  }

  /** Writes next over current: the status subresource changes only the status, the object everything else. */
  private write<T extends KubeResource>(current: KubeResource, next: T, options: UpdateOptions): T {
    const stored = clone(current) as T & { status?: unknown; spec?: unknown };
    const incoming = next as T & { status?: unknown };
    if (options.subresource === "status") {
      stored.status = incoming.status;
    } else {
      const { status } = stored;
      const specChanged = JSON.stringify(strip(stored)) !== JSON.stringify(strip(incoming));
      Object.assign(stored, incoming, { status });
      for (const k of Object.keys(stored)) {
        if (!(k in incoming) && k !== "status") {
          delete (stored as Record<string, unknown>)[k];
        }
      }
      stored.metadata = { ...incoming.metadata, uid: current.metadata.uid, creationTimestamp: current.metadata.creationTimestamp, generation: (current.metadata.generation ?? 1) + (specChanged ? 1 : 0) };
    }
    stored.metadata.resourceVersion = String(++this.version);
    if (!options.dryRun) {
      this.put(stored);
    }
    return clone(stored);
  }
}

function storeKey(type: TypeMeta, key: ObjectKey): string {
  return `${type.apiVersion}|${type.kind}|${key.namespace ?? ""}|${key.name}`;
}

function resourceOf(type: TypeMeta): string {
  const group = gvkOf(type).group;
  return `${type.kind.toLowerCase()}s${group ? `.${group}` : ""}`;
}

/** obj with a metadata object, as every stored object has. */
function withMetadata(obj: Manifest): KubeResource {
  return { ...obj, metadata: obj.metadata ?? {} };
}

function clone<T>(value: T): T {
  return structuredClone(value);
}

/** What generation counts: everything but metadata and status. */
function strip(obj: KubeResource): unknown {
  const { metadata: _m, status: _s, ...rest } = obj as KubeResource & { status?: unknown };
  return rest;
}

/** RFC 7386. */
function mergePatch(target: unknown, patch: unknown): unknown {
  if (typeof patch !== "object" || patch === null || Array.isArray(patch)) {
    return patch;
  }
  const out: Record<string, unknown> = typeof target === "object" && target !== null && !Array.isArray(target) ? { ...(target as Record<string, unknown>) } : {};
  for (const [k, v] of Object.entries(patch)) {
    if (v === null) {
      delete out[k];
    } else {
      out[k] = mergePatch(out[k], v);
    }
  }
  return out;
}

function parseSelector(selector: string): (labels: Record<string, string>) => boolean {
  const terms = selector
    .split(",")
    .map((t) => t.trim())
    .filter(Boolean)
    .map((term) => {
      const m = /^(!?)([^=!]+?)\s*(?:(==|=|!=)\s*(.*))?$/.exec(term);
      if (!m) {
        throw new Error(`FakeCluster: unsupported label selector term ${JSON.stringify(term)}`);
      }
      const [, not, key, op, value] = m;
      return (labels: Record<string, string>) => {
        const has = key! in labels;
        if (!op) {
          return not ? !has : has;
        }
        return op === "!=" ? labels[key!] !== value : labels[key!] === value;
      };
    });
  return (labels) => terms.every((t) => t(labels));
}

function apiError(Class: typeof ClusterError, code: number, reason: string, message: string): ClusterError {
  const grpc: Record<number, Code> = {
    404: Code.NotFound,
    409: reason === "AlreadyExists" ? Code.AlreadyExists : Code.Aborted,
    422: Code.InvalidArgument,
  };
  const status: Status = { kind: "Status", apiVersion: "v1", status: "Failure", message, reason, code };
  return new Class(message, grpc[code] ?? Code.Unknown, status);
}

const patchTypes: Record<number, PatchType> = {
  [PatchTypeProto.MERGE]: "merge",
  [PatchTypeProto.JSON]: "json",
  [PatchTypeProto.STRATEGIC_MERGE]: "strategic",
  [PatchTypeProto.APPLY]: "apply",
};

/**
 * Serves any Cluster (a FakeCluster, typically) as the host's
 * ClusterService on address, so that a sidecar process under test can be
 * pointed at it with its Cluster service address. ClusterErrors cross the
 * wire as the host sends them: a gRPC code and the API server's status.
 */
export async function serveCluster(cluster: Cluster, address: string): Promise<{ stop(): Promise<void> }> {
  const type = (kind: { group: string; version: string; kind: string } | undefined): TypeMeta => ({
    apiVersion: apiVersionOf(kind ?? { group: "", version: "" }),
    kind: kind?.kind ?? "",
  });
  const key = (k: { namespace: string; name: string } | undefined): ObjectKey => ({ namespace: k?.namespace ?? "", name: k?.name ?? "" });
  // The object of a create or update, its apiVersion, kind, namespace and
  // name defaulted to the request's kind and key, as the host does.
  const addressed = (data: Uint8Array, kind: Parameters<typeof type>[0], k: Parameters<typeof key>[0]): KubeResource => {
    const obj = decodeJSON<KubeResource>(data);
    const t = type(kind);
    const want = key(k);
    obj.apiVersion ||= t.apiVersion;
    obj.kind ||= t.kind;
    obj.metadata ??= {};
    obj.metadata.namespace ||= want.namespace;
    obj.metadata.name ||= want.name;
    return obj;
  };
  const onWire = (err: unknown): unknown => {
    if (err instanceof ClusterError) {
      const details = err.status ? [{ desc: APIErrorSchema, value: { status: encodeJSON(err.status) } }] : [];
      return new ConnectError(err.message, err.code, undefined, details);
    }
    return err;
  };
  const wrap =
    <A extends unknown[], R>(fn: (...args: A) => Promise<R>) =>
    async (...args: A): Promise<R> => {
      try {
        return await fn(...args);
      } catch (err) {
        throw onWire(err);
      }
    };
  const handler = connectNodeAdapter({
    grpc: true,
    grpcWeb: false,
    connect: false,
    routes: (router) =>
      router.service(ClusterService, {
        get: wrap(async (req) => ({
          object: encodeJSON(
            await cluster.get(type(req.kind), key(req.key), { subresource: req.subresource, uncached: req.options?.uncached ?? false }),
          ),
          source: ReadSource.CACHE,
        })),
        list: wrap(async (req) => {
          const list = await cluster.list(type(req.kind), {
            ...(req.namespace ? { namespace: req.namespace } : {}),
            ...(req.labelSelector ? { labelSelector: req.labelSelector } : {}),
            ...(req.fieldSelector ? { fieldSelector: req.fieldSelector } : {}),
            uncached: req.options?.uncached ?? false,
          });
          return { items: list.items.map((i) => encodeJSON(i)), continueToken: list.continue, resourceVersion: list.resourceVersion, source: ReadSource.CACHE };
        }),
        create: wrap(async (req) => {
          const options = { dryRun: req.options?.dryRun ?? false };
          if (req.subresource) {
            const body = decodeJSON<object>(req.object);
            return { object: encodeJSON(await cluster.createSubresource(type(req.kind), key(req.key), req.subresource, body, options)) };
          }
          return { object: encodeJSON(await cluster.create(addressed(req.object, req.kind, req.key), options)) };
        }),
        update: wrap(async (req) => ({
          object: encodeJSON(
            await cluster.update(addressed(req.object, req.kind, req.key), { subresource: req.subresource, dryRun: req.options?.dryRun ?? false }),
          ),
        })),
        patch: wrap(async (req) => ({
          object: encodeJSON(
            await cluster.patch(type(req.kind), key(req.key), decodeJSON(req.patch), {
              type: patchTypes[req.type] ?? "merge",
              subresource: req.subresource,
              force: req.options?.force ?? false,
              dryRun: req.options?.dryRun ?? false,
            }),
          ),
        })),
        delete: wrap(async (req) => {
          const propagation = { [DeletePropagation.BACKGROUND]: "Background", [DeletePropagation.FOREGROUND]: "Foreground", [DeletePropagation.ORPHAN]: "Orphan" } as const;
          await cluster.delete(type(req.kind), key(req.key), {
            ...(req.propagation ? { propagation: propagation[req.propagation as 1 | 2 | 3] } : {}),
            preconditions: { uid: req.preconditionUid, resourceVersion: req.preconditionResourceVersion },
            dryRun: req.options?.dryRun ?? false,
          });
          return {};
        }),
        recordEvent: wrap(async (req) => {
          const object = { ...type(req.kind), metadata: key(req.key) };
          await cluster.recordEvent(object, {
            type: req.event?.type === EventType.WARNING ? "Warning" : "Normal",
            reason: req.event?.reason ?? "",
            message: req.event?.message ?? "",
            ...(req.event?.action ? { action: req.event.action } : {}),
          });
          return {};
        }),
        // The cluster served remembers no versions: a resumed watch is told
        // to list again, as the host tells one it no longer remembers.
        async *watch(req, context) {
          if (req.resourceVersion) {
            throw new ConnectError(`resource version ${req.resourceVersion} expired: relist, watch again without resource_version`, Code.FailedPrecondition);
          }
          const wire = { added: WatchEventType.ADDED, modified: WatchEventType.MODIFIED, deleted: WatchEventType.DELETED };
          const events = cluster.watch(type(req.kind), {
            ...(req.namespace ? { namespace: req.namespace } : {}),
            ...(req.labelSelector ? { labelSelector: req.labelSelector } : {}),
            ...(req.fieldSelector ? { fieldSelector: req.fieldSelector } : {}),
            signal: context.signal,
          });
          try {
            for await (const ev of events) {
              yield ev.type === "synced"
                ? { type: WatchEventType.INITIAL_LIST_DONE }
                : { type: wire[ev.type], object: encodeJSON(ev.object), resourceVersion: ev.object.metadata.resourceVersion ?? "" };
            }
          } catch (err) {
            throw onWire(err);
          }
        },
        resolveKind: wrap(async (req) => {
          const resolved = await cluster.resolveKind(type(req.kind));
          return { kind: gvkOf(resolved), resource: resolved.resource, namespaced: resolved.namespaced };
        }),
      }),
  });
  const endpoint = parseAddress(address);
  if ("path" in endpoint) {
    await prepareSocket(endpoint.path);
  }
  const server = createServer(handler);
  const sessions = new Set<ServerHttp2Session>();
  server.on("session", (s) => {
    sessions.add(s);
    s.once("close", () => sessions.delete(s));
  });
  await new Promise<void>((resolve) => ("path" in endpoint ? server.listen(endpoint.path, resolve) : server.listen(endpoint.port, endpoint.host, resolve)));
  return {
    stop: async () => {
      const closed = new Promise((resolve) => server.close(resolve));
      for (const s of sessions) {
        s.destroy();
      }
      await closed;
    },
  };
}
