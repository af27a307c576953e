import { readFileSync } from "node:fs";
import type { SecureClientSessionOptions } from "node:http2";
import { connect } from "node:net";
import { connect as tlsConnect } from "node:tls";

import { create } from "@bufbuild/protobuf";
import { createClient, createContextKey, createContextValues, ConnectError, type CallOptions, type Client, type Interceptor } from "@connectrpc/connect";
import { createGrpcTransport, Http2SessionManager } from "@connectrpc/connect-node";
import type { Context } from "@opentelemetry/api";

import { parseAddress } from "./address.js";
import { clusterError } from "./errors.js";
import type { Logger } from "./log.js";
import {
  ClusterService,
  DeletePropagation,
  PatchType as PatchTypeProto,
  ReadOptionsSchema,
  ReadSource as ReadSourceProto,
  WriteOptionsSchema,
} from "./gen/polyop/v1alpha1/cluster_pb.js";
import { EventType } from "./gen/polyop/v1alpha1/reconcile_pb.js";
import { kindOf, typeMetaOf, type KindRef, type ObjectOf, type TypedKindRef } from "./kinds.js";
import { apiVersionOf, decodeJSON, encodeJSON, gvkOf, keyOf, type KubeResource, type Manifest, type ObjectKey, type TypeMeta } from "./objects.js";
import { watchEvents, type WatchEvent, type WatchOptions } from "./watch.js";
import { failSpan, startClientSpan } from "./tracing.js";

/** The environment variable a sidecar reads the Cluster service's address from. */
export const CLUSTER_ADDRESS_ENV = "POLYOP_CLUSTER_ADDRESS";

/**
 * The environment variable naming the PEM file of the CA that signed the
 * host's Cluster service certificate (--cluster-tls-cert-file). Setting it
 * turns TLS on.
 */
export const CLUSTER_TLS_CA_FILE_ENV = "POLYOP_CLUSTER_TLS_CA_FILE";
/**
 * The environment variable naming the PEM file of the client certificate the
 * sidecar presents, signed by the CA of the host's --cluster-tls-client-ca-file.
 */
export const CLUSTER_TLS_CERT_FILE_ENV = "POLYOP_CLUSTER_TLS_CERT_FILE";
/** The environment variable naming the PEM file of the client certificate's key. */
export const CLUSTER_TLS_KEY_FILE_ENV = "POLYOP_CLUSTER_TLS_KEY_FILE";

/** TLS to the Cluster service, as PEM: the host's CA, and the client certificate its mutual TLS requires. */
export interface ClusterTLS {
  /** The CA that signed the host's certificate. */
  ca: string | Buffer;
  /** The client certificate; with key. */
  cert?: string | Buffer;
  /** The client certificate's key; with cert. */
  key?: string | Buffer;
}

/**
 * The TLS of the files POLYOP_CLUSTER_TLS_CA_FILE, POLYOP_CLUSTER_TLS_CERT_FILE
 * and POLYOP_CLUSTER_TLS_KEY_FILE name, or undefined (plain text) when
 * POLYOP_CLUSTER_TLS_CA_FILE is not set.
 */
export function clusterTLSFromEnv(env: NodeJS.ProcessEnv = process.env): ClusterTLS | undefined {
  const ca = env[CLUSTER_TLS_CA_FILE_ENV];
  const cert = env[CLUSTER_TLS_CERT_FILE_ENV];
  const key = env[CLUSTER_TLS_KEY_FILE_ENV];
  if (!ca) {
    if (cert || key) {
      throw new Error(
        `polyop: ${CLUSTER_TLS_CERT_FILE_ENV} and ${CLUSTER_TLS_KEY_FILE_ENV} are set but ${CLUSTER_TLS_CA_FILE_ENV} is not: TLS needs the CA that signed the host's certificate`,
      );
    }
    return undefined;
  }
  if (!cert !== !key) {
    throw new Error(`polyop: a client certificate needs both ${CLUSTER_TLS_CERT_FILE_ENV} and ${CLUSTER_TLS_KEY_FILE_ENV}`);
  }
  return { ca: readFileSync(ca), ...(cert && key ? { cert: readFileSync(cert), key: readFileSync(key) } : {}) };
}

/** Where a read was served from: the host's informer cache, or the API server. */
export type ReadSource = "cache" | "apiServer" | "unknown";

/** Every call takes an AbortSignal; inside a reconcile it defaults to the reconcile's. */
export interface CallSignal {
  signal?: AbortSignal;
}

export interface GetOptions extends CallSignal {
  /** Read from the API server even when the host caches the kind. */
  uncached?: boolean;
  /**
   * Read this subresource of the object instead, for example "scale" (an
   * autoscaling/v1 Scale), from the API server. "status" is the object itself.
   */
  subresource?: string;
}

export interface ListOptions extends CallSignal {
  /** Only objects in this namespace; every namespace when absent. */
  namespace?: string;
  /** A label selector in kubectl's -l syntax. */
  labelSelector?: string;
  /** A field selector, for example "metadata.name=foo". */
  fieldSelector?: string;
  /** The most objects to return (honoured by the API server; the cache returns all). */
  limit?: number;
  /** The continue token of a previous, limited list. */
  continue?: string;
  /** Read from the API server even when the host caches the kind. */
  uncached?: boolean;
}

/** A page of objects. */
export interface ObjectList<T> {
  items: T[];
  /** The token for the next page; "" on the last. */
  continue: string;
  resourceVersion: string;
  source: ReadSource;
}

export interface WriteOptions extends CallSignal {
  /** Validate and admit the write, but persist nothing. */
  dryRun?: boolean;
  /** The field manager recorded in managedFields. Defaults to the host's, "polyop-<sidecar name>". */
  fieldManager?: string;
}

export interface UpdateOptions extends WriteOptions {
  /** The subresource to write, for example "status"; the object itself when absent. */
  subresource?: string;
}

/** merge: RFC 7386; json: RFC 6902; strategic: built-in kinds only; apply: server-side apply. */
export type PatchType = "merge" | "json" | "strategic" | "apply";

export interface PatchOptions extends UpdateOptions {
  type: PatchType;
  /** With "apply", take ownership of fields other managers own. */
  force?: boolean;
}

export interface ApplyOptions extends UpdateOptions {
  /** Take ownership of fields other managers own. */
  force?: boolean;
}

export interface DeleteOptions extends CallSignal {
  /** What happens to the object's dependents. Defaults to the kind's default. */
  propagation?: "Background" | "Foreground" | "Orphan";
  /** Delete only if the object still has this UID and/or resourceVersion. */
  preconditions?: { uid?: string; resourceVersion?: string };
  /** The grace period in seconds; the kind's default when absent. */
  gracePeriodSeconds?: number;
  dryRun?: boolean;
}

/** A Kubernetes Event. */
export interface EventSpec {
  type: "Normal" | "Warning";
  /** A short CamelCase reason, for example "Synced". */
  reason: string;
  message: string;
  /** What was done (events.k8s.io/v1 action); defaults to the reason. */
  action?: string;
}

/** How the API server serves a kind. */
export interface ResolvedKind extends TypeMeta {
  /** The resource, plural and lower-case, for example "configmaps". */
  resource: string;
  namespaced: boolean;
}

/**
 * Cluster reads and writes the cluster through the polyop host: reads from
 * the host's informer cache for the kinds it watches, from the API server
 * otherwise; writes with the host's credentials. Errors from the API server
 * are NotFoundError, AlreadyExistsError, ConflictError, InvalidError,
 * ForbiddenError, … (all ClusterError), carrying the API server's status.
 *
 * Kinds are given in any form of KindRef: as in a manifest, by apiVersion
 * and kind, as "group/version/Kind", or as a typed model — a kubernetes-models
 * class (ConfigMap, Deployment) or a defineKind model, which types what is
 * read without naming the type again:
 *
 *     const configMaps = { apiVersion: "v1", kind: "ConfigMap" };
 *     const cm = await cluster.get<ConfigMap>(configMaps, { namespace: "default", name: "settings" });
 *     const deployment = await cluster.get(Deployment, { namespace: "shop", name: "web" }); // kubernetes-models
 *
 * Objects written are any Manifest: a KubeResource, or a kubernetes-models
 * object (IDeployment, new Deployment({...})).
 */
export interface Cluster {
  get<K extends TypedKindRef>(kind: K, key: ObjectKey, options?: GetOptions): Promise<ObjectOf<K>>;
  get<T extends Manifest = KubeResource>(kind: KindRef, key: ObjectKey, options?: GetOptions): Promise<T>;
  list<K extends TypedKindRef>(kind: K, options?: ListOptions): Promise<ObjectList<ObjectOf<K>>>;
  list<T extends Manifest = KubeResource>(kind: KindRef, options?: ListOptions): Promise<ObjectList<T>>;
  create<T extends Manifest>(obj: T, options?: WriteOptions): Promise<T>;
  /**
   * Creates a subresource of the object kind/key, for example evicts a Pod:
   *
   *     await cluster.createSubresource(pods, { namespace: "shop", name: "web-0" }, "eviction",
   *       { apiVersion: "policy/v1", kind: "Eviction" });
   *
   * body is the subresource's object, with apiVersion and kind (an Eviction, a
   * TokenRequest); its name and namespace default to the object's. Resolves
   * to what the API server answered: a TokenRequest with its token, a Status
   * for an eviction.
   */
  createSubresource<T extends TypeMeta = TypeMeta>(kind: KindRef, key: ObjectKey, subresource: string, body: object, options?: WriteOptions): Promise<T>;
  /** Replaces the object (or a subresource), with optimistic concurrency on metadata.resourceVersion. */
  update<T extends Manifest>(obj: T, options?: UpdateOptions): Promise<T>;
  patch<T extends Manifest = KubeResource>(kind: KindRef, key: ObjectKey, patch: unknown, options: PatchOptions): Promise<T>;
  /** Server-side apply of obj, the fields this manager owns, as a whole object. */
  apply<T extends Manifest>(obj: T, options?: ApplyOptions): Promise<T>;
  delete(kind: KindRef, key: ObjectKey, options?: DeleteOptions): Promise<void>;
  /** Records an Event on obj (its apiVersion, kind, namespace and name are used). */
  recordEvent(obj: Manifest, event: EventSpec, options?: CallSignal): Promise<void>;
  /** Maps a kind to its resource and scope (an empty version: the preferred one). */
  resolveKind(kind: KindRef, options?: CallSignal): Promise<ResolvedKind>;
  /**
   * Watches the objects of a kind the host caches, from its cache: first each
   * object it holds ("added"), then "synced" (your view is complete), then
   * every change ("added", "modified", "deleted"), until the loop breaks or
   * options.signal aborts, either of which cancels the stream:
   *
   *     for await (const event of cluster.watch<ConfigMap>(configMaps, { namespace, labelSelector: "app=web", signal })) {
   *       if (event.type === "synced") continue;
   *       view.set(event.object.metadata.name, event.object); // or delete, for "deleted"
   *     }
   *
   * The stream opens when the loop starts. It resumes by itself when the host
   * ends it (a restart, or a reader so slow that the host cut it off): from
   * the last version seen, or, when the host no longer remembers that far,
   * by listing again — "added" or "modified" for every object, "deleted" for
   * those that went meanwhile, then "synced" again. An error it cannot get
   * past (the host does not cache the kind, a selector it refuses) is thrown
   * as a ClusterError. Read promptly: the host holds about a thousand events
   * for a reader before it cuts it off (and the watch resumes).
   */
  watch<K extends TypedKindRef>(kind: K, options?: WatchOptions): AsyncIterable<WatchEvent<ObjectOf<K>>>;
  watch<T extends Manifest = KubeResource>(kind: KindRef, options?: WatchOptions): AsyncIterable<WatchEvent<T>>;
}

/** Options of a ClusterClient. */
export interface ClusterClientOptions {
  /** The largest message sent or received, in bytes. Defaults to 64 MiB, as the host's. */
  maxMessageSize?: number;
  /** The deadline of a call that has no signal, in milliseconds. Defaults to 30 seconds. */
  timeoutMs?: number;
  /** The signal of calls that pass none, for example a reconcile's. Defaults to none. */
  signal?: AbortSignal;
  /**
   * Dial the Cluster service with TLS, for a host serving it with
   * --cluster-tls-cert-file, --cluster-tls-key-file and
   * --cluster-tls-client-ca-file. Defaults to clusterTLSFromEnv(): TLS when
   * POLYOP_CLUSTER_TLS_CA_FILE is set, plain text otherwise.
   */
  tls?: ClusterTLS;
  /** Where a watch logs, at debug, its resumptions. Defaults to none. */
  log?: Logger;
}

const readSources: Record<ReadSourceProto, ReadSource> = {
  [ReadSourceProto.UNSPECIFIED]: "unknown",
  [ReadSourceProto.CACHE]: "cache",
  [ReadSourceProto.API_SERVER]: "apiServer",
};

const patchTypes: Record<PatchType, PatchTypeProto> = {
  merge: PatchTypeProto.MERGE,
  json: PatchTypeProto.JSON,
  strategic: PatchTypeProto.STRATEGIC_MERGE,
  apply: PatchTypeProto.APPLY,
};

const propagations = {
  Background: DeletePropagation.BACKGROUND,
  Foreground: DeletePropagation.FOREGROUND,
  Orphan: DeletePropagation.ORPHAN,
} as const;

/**
 * The Cluster service's gRPC client. Make one with connectCluster; a sidecar
 * makes one itself (Sidecar.cluster, ctx.cluster) from the address the host
 * sends in its handshake.
 */
export class ClusterClient implements Cluster {
  readonly address: string;
  private readonly client: Client<typeof ClusterService>;
  private readonly sessions: Http2SessionManager;
  private readonly options: ClusterClientOptions;
  /** Aborted by close: it ends the watches of this client and of those sharing its connection. */
  private readonly closed: AbortController;
  /** The trace context of the handler this client's calls are made from, passed to the tracing interceptor. */
  private readonly traceContext: Context | undefined;

  constructor(address: string, options: ClusterClientOptions = {}, shared?: ClusterClient, traceContext?: Context) {
    this.address = address;
    this.options = options;
    this.traceContext = traceContext;
    if (shared) {
      this.client = shared.client;
      this.sessions = shared.sessions;
      this.closed = shared.closed;
      return;
    }
    this.closed = new AbortController();
    const endpoint = parseAddress(address);
    const tls = options.tls ?? clusterTLSFromEnv();
    const scheme = tls ? "https" : "http";
    const baseUrl =
      "path" in endpoint
        ? `${scheme}://localhost`
        : `${scheme}://${endpoint.host.includes(":") ? `[${endpoint.host}]` : endpoint.host || "localhost"}:${endpoint.port}`;
    let sessionOptions: SecureClientSessionOptions = tls ? { ...tls } : {};
    if ("path" in endpoint) {
      const path = endpoint.path;
      sessionOptions = {
        createConnection: () => (tls ? tlsConnect({ path, ...tls, servername: "localhost", ALPNProtocols: ["h2"] }) : connect({ path })),
      };
    }
    this.sessions = new Http2SessionManager(baseUrl, { pingIntervalMs: 30_000 }, sessionOptions);
    const max = options.maxMessageSize ?? 64 << 20;
    this.client = createClient(
      ClusterService,
      createGrpcTransport({ baseUrl, sessionManager: this.sessions, readMaxBytes: max, writeMaxBytes: max, interceptors: [tracingInterceptor] }),
    );
  }

  /**
   * A client sharing this one's connection whose calls default to signal, and
   * whose calls are child spans of traceContext's span when no span is active.
   */
  withSignal(signal: AbortSignal, traceContext?: Context): ClusterClient {
    return new ClusterClient(this.address, { ...this.options, signal }, this, traceContext);
  }

  /** Closes the connection, and ends the watches open on it (their loops end without an error). */
  close(): void {
    this.closed.abort();
    this.sessions.abort();
  }

  private call(options: CallSignal | undefined): CallOptions {
    const signal = options?.signal ?? this.options.signal;
    const call: CallOptions = signal ? { signal } : { timeoutMs: this.options.timeoutMs ?? 30_000 };
    if (this.traceContext) {
      call.contextValues = createContextValues().set(handlerContext, this.traceContext);
    }
    return call;
  }

  private async run<T>(what: string, fn: () => Promise<T>): Promise<T> {
    try {
      return await fn();
    } catch (err) {
      throw clusterError(err, what);
    }
  }

  get<K extends TypedKindRef>(kind: K, key: ObjectKey, options?: GetOptions): Promise<ObjectOf<K>>;
  get<T extends Manifest = KubeResource>(kind: KindRef, key: ObjectKey, options?: GetOptions): Promise<T>;
  async get<T extends Manifest>(kind: KindRef, key: ObjectKey, options?: GetOptions): Promise<T> {
    const type = typeMetaOf(kind, "cluster.get");
    const subresource = options?.subresource ?? "";
    const resp = await this.run(`getting ${type.kind} ${describeKey(key)}${describeSub(subresource)}`, () =>
      this.client.get({ kind: gvkOf(type), key: wireKey(key), subresource, options: readOptions(options) }, this.call(options)),
    );
    const obj = decodeJSON<T>(resp.object);
    return subresource && subresource !== "status" ? obj : withType(obj, type);
  }

  list<K extends TypedKindRef>(kind: K, options?: ListOptions): Promise<ObjectList<ObjectOf<K>>>;
  list<T extends Manifest = KubeResource>(kind: KindRef, options?: ListOptions): Promise<ObjectList<T>>;
  async list<T extends Manifest>(kind: KindRef, options?: ListOptions): Promise<ObjectList<T>> {
    const type = typeMetaOf(kind, "cluster.list");
    const resp = await this.run(`listing ${type.kind}`, () =>
      this.client.list(
        {
          kind: gvkOf(type),
          namespace: options?.namespace ?? "",
          options: readOptions(options),
          labelSelector: options?.labelSelector ?? "",
          fieldSelector: options?.fieldSelector ?? "",
          limit: BigInt(options?.limit ?? 0),
          continueToken: options?.continue ?? "",
        },
        this.call(options),
      ),
    );
    return {
      items: resp.items.map((item) => withType(decodeJSON<T>(item), type)),
      continue: resp.continueToken,
      resourceVersion: resp.resourceVersion,
      source: readSources[resp.source] ?? "unknown",
    };
  }

  async create<T extends Manifest>(obj: T, options?: WriteOptions): Promise<T> {
    const resp = await this.run(`creating ${obj.kind} ${describeKey(keyOf(obj))}`, () =>
      this.client.create({ kind: gvkOf(obj), key: wireKey(keyOf(obj)), options: writeOptions(options), object: encodeJSON(obj) }, this.call(options)),
    );
    return decodeJSON<T>(resp.object);
  }

  async createSubresource<T extends TypeMeta = TypeMeta>(
    kind: KindRef,
    key: ObjectKey,
    subresource: string,
    body: object,
    options?: WriteOptions,
  ): Promise<T> {
    const gvk = kindOf(kind, "cluster.createSubresource");
    const resp = await this.run(`creating ${gvk.kind} ${describeKey(key)}${describeSub(subresource)}`, () =>
      this.client.create(
        { kind: gvk, key: wireKey(key), subresource, options: writeOptions(options), object: encodeJSON(body) },
        this.call(options),
      ),
    );
    return decodeJSON<T>(resp.object);
  }

  async update<T extends Manifest>(obj: T, options?: UpdateOptions): Promise<T> {
    const resp = await this.run(`updating ${obj.kind} ${describeKey(keyOf(obj))}`, () =>
      this.client.update(
        {
          kind: gvkOf(obj),
          key: wireKey(keyOf(obj)),
          subresource: options?.subresource ?? "",
          options: writeOptions(options),
          object: encodeJSON(obj),
        },
        this.call(options),
      ),
    );
    return decodeJSON<T>(resp.object);
  }

  async patch<T extends Manifest = KubeResource>(kind: KindRef, key: ObjectKey, patch: unknown, options: PatchOptions): Promise<T> {
    const type = typeMetaOf(kind, "cluster.patch");
    const body = patch instanceof Uint8Array ? patch : typeof patch === "string" ? new TextEncoder().encode(patch) : encodeJSON(patch);
    const resp = await this.run(`patching ${type.kind} ${describeKey(key)}`, () =>
      this.client.patch(
        {
          kind: gvkOf(type),
          key: wireKey(key),
          subresource: options.subresource ?? "",
          options: writeOptions(options, options.force ?? false),
          patch: body,
          type: patchTypes[options.type],
        },
        this.call(options),
      ),
    );
    return decodeJSON<T>(resp.object);
  }

  apply<T extends Manifest>(obj: T, options?: ApplyOptions): Promise<T> {
    return this.patch<T>(obj, keyOf(obj), obj, { ...options, type: "apply" });
  }

  async delete(kind: KindRef, key: ObjectKey, options?: DeleteOptions): Promise<void> {
    const type = typeMetaOf(kind, "cluster.delete");
    await this.run(`deleting ${type.kind} ${describeKey(key)}`, () =>
      this.client.delete(
        {
          kind: gvkOf(type),
          key: wireKey(key),
          options: writeOptions(options),
          propagation: options?.propagation ? propagations[options.propagation] : DeletePropagation.UNSPECIFIED,
          preconditionUid: options?.preconditions?.uid ?? "",
          preconditionResourceVersion: options?.preconditions?.resourceVersion ?? "",
          ...(options?.gracePeriodSeconds === undefined ? {} : { gracePeriodSeconds: BigInt(options.gracePeriodSeconds) }),
        },
        this.call(options),
      ),
    );
  }

  async recordEvent(obj: Manifest, event: EventSpec, options?: CallSignal): Promise<void> {
    await this.run(`recording an event on ${obj.kind} ${describeKey(keyOf(obj))}`, () =>
      this.client.recordEvent(
        {
          kind: gvkOf(obj),
          key: wireKey(keyOf(obj)),
          event: {
            type: event.type === "Warning" ? EventType.WARNING : EventType.NORMAL,
            reason: event.reason,
            message: event.message,
            action: event.action ?? "",
          },
        },
        this.call(options),
      ),
    );
  }

  async resolveKind(kind: KindRef, options?: CallSignal): Promise<ResolvedKind> {
    const type = typeMetaOf(kind, "cluster.resolveKind");
    const resp = await this.run(`resolving ${type.kind}`, () => this.client.resolveKind({ kind: gvkOf(type) }, this.call(options)));
    const gvk = resp.kind ?? gvkOf(type);
    return { apiVersion: apiVersionOf(gvk), kind: gvk.kind, resource: resp.resource, namespaced: resp.namespaced };
  }

  watch<K extends TypedKindRef>(kind: K, options?: WatchOptions): AsyncIterable<WatchEvent<ObjectOf<K>>>;
  watch<T extends Manifest = KubeResource>(kind: KindRef, options?: WatchOptions): AsyncIterable<WatchEvent<T>>;
  watch<T extends Manifest>(kind: KindRef, options: WatchOptions = {}): AsyncIterable<WatchEvent<T>> {
    const type = typeMetaOf(kind, "cluster.watch");
    // No deadline: a watch lasts until it is cancelled, or the client closed.
    const given = options.signal ?? this.options.signal;
    const signal = given ? AbortSignal.any([given, this.closed.signal]) : this.closed.signal;
    return watchEvents<T>((req, s) => this.client.watch(req, { signal: s }), type, { ...options, signal }, this.options.log);
  }
}

/** The trace context of the handler a call is made from, when the client is bound to one. */
const handlerContext = createContextKey<Context | undefined>(undefined, { description: "polyop handler trace context" });

/**
 * Makes every Cluster service call a client span, child of the active span
 * (the handler's, or one the user started in it), and sends its trace context
 * (traceparent, tracestate, baggage) in the call's metadata, so that the host
 * continues the trace. A stream's span covers its opening.
 */
const tracingInterceptor: Interceptor = (next) => async (req) => {
  const span = startClientSpan(req.service.typeName, req.method.name, req.header, req.contextValues.get(handlerContext));
  try {
    return await next(req);
  } catch (err) {
    failSpan(span, err);
    span.setAttribute("rpc.grpc.status_code", ConnectError.from(err).code);
    throw err;
  } finally {
    span.end();
  }
};

/** Dials the host's Cluster service at address (in the sidecar address forms). It connects on first use. */
export function connectCluster(address: string, options?: ClusterClientOptions): ClusterClient {
  return new ClusterClient(address, options);
}

function wireKey(key: ObjectKey) {
  return { namespace: key.namespace ?? "", name: key.name };
}

function describeKey(key: ObjectKey): string {
  return key.namespace ? `${key.namespace}/${key.name}` : key.name;
}

function describeSub(subresource: string): string {
  return subresource ? ` (${subresource})` : "";
}

function readOptions(options: { uncached?: boolean } | undefined) {
  return create(ReadOptionsSchema, { uncached: options?.uncached ?? false });
}

/** The wire's WriteOptions; force only for an apply (the host refuses it elsewhere). */
function writeOptions(options: WriteOptions | undefined, force = false) {
  return create(WriteOptionsSchema, { dryRun: options?.dryRun ?? false, fieldManager: options?.fieldManager ?? "", force });
}

/** Sets the apiVersion and kind a read object lacks (the cache may leave them out). */
function withType<T extends Manifest>(obj: T, type: TypeMeta): T {
  obj.apiVersion ||= type.apiVersion;
  obj.kind ||= type.kind;
  return obj;
}
