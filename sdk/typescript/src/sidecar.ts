import type { Context } from "@opentelemetry/api";

import type { Defaulter, FieldErrorValidator, Validator } from "./admission.js";
import { CLUSTER_ADDRESS_ENV, ClusterClient, type Cluster } from "./cluster.js";
import type { Converter } from "./conversion.js";
import { description } from "./describe.js";
import { deprecated } from "./deprecation.js";
import type { SidecarEnv } from "./dispatch.js";
import { ProtocolVersion, type DescribeRequest, type DescribeResponse } from "./gen/polyop/v1alpha1/describe_pb.js";
import type { CachedKindOptions, DeclaredIndex, IndexOptions } from "./indexes.js";
import type { KindRef, ObjectOf, TypedKindRef } from "./kinds.js";
import { jsonLogger, type Logger } from "./log.js";
import type { KubeResource, Manifest } from "./objects.js";
import type { DeletedHandler, Finalizer, Reconciler } from "./reconcile.js";
import { Registry, type ControllerOptions, type ConversionOptions, type FinalizerOptions, type WebhookOptions } from "./registry.js";
import { resolveServeOptions, serve, type RunningSidecar, type ServeOptions } from "./serve.js";
import { sidecarService, type SidecarServiceImpl } from "./service.js";
import { PROTOCOL_VERSION } from "./version.js";
import type { WatchEvent, WatchOptions } from "./watch.js";

// The facade: what a user creates, registers on and serves. It holds a
// Registry (what is registered), hands it to dispatch (service.ts) and
// serves that with serve.ts; none of those knows the Sidecar.

/** Options of a Sidecar. How it serves is given to serve or start (ServeOptions). */
export interface SidecarOptions {
  /**
   * A short name for the sidecar, for example "configmapsync-operator": the
   * host's logs, metrics and leader election lease name it. Lower-case
   * letters, digits and '-'. Required.
   */
  name: string;
  /**
   * The largest gRPC message sent or received, in bytes, served and to the
   * Cluster service; keep it in step with the host's --max-message-size.
   * Defaults to 64 MiB.
   */
  maxMessageSize?: number;
  /**
   * The address of the host's Cluster service. Defaults to the address the
   * host sends in its handshake, else the POLYOP_CLUSTER_ADDRESS environment
   * variable (which a restarted sidecar, whom the host does not greet again,
   * relies on).
   */
  clusterAddress?: string;
  /** The logger. Defaults to JSON lines on stderr at level info. */
  logger?: Logger;
  /** @deprecated Pass it to serve or start, in ServeOptions. */
  gracefulShutdownTimeoutMs?: number;
  /** @deprecated Pass it to serve or start, in ServeOptions. */
  reflection?: boolean;
  /** @deprecated Pass it to serve or start, in ServeOptions. */
  reconcileStream?: boolean;
}

/**
 * A polyop sidecar: register reconcilers, finalizers, defaulters, validators
 * and converters, then serve. What the host learns through Describe is built
 * from the registrations and nothing else.
 *
 *     const sidecar = new Sidecar({ name: "widget-operator" });
 *     sidecar.reconciler({ for: Widget }, async (widget, ctx) => {
 *       widget.status = { ready: true };
 *       return { requeueAfter: 60_000 };
 *     });
 *     await sidecar.serve({ address: "unix:///var/run/polyop/sidecar.sock", signal: shutdownSignal() });
 *
 * Every registration takes the kind in any form of KindRef: a typed model
 * (defineKind's, or a kubernetes-models class), kind info, or
 * "group/version/Kind".
 */
export class Sidecar {
  readonly name: string;
  readonly log: Logger;
  readonly maxMessageSize: number;
  /**
   * The implementation of polyop.v1alpha1.SidecarService, protocol-neutral;
   * the test harness in "@polyop/sidecar/testing" calls it directly.
   */
  readonly service: SidecarServiceImpl;

  /** The serve options the SidecarOptions gave (deprecated there), under those given to serve or start. */
  private readonly serveDefaults: ServeOptions;
  /** The options the sidecar serves with, once it does. */
  private serving: ServeOptions | undefined;
  private readonly registry = new Registry();
  private readonly clusterAddressOption: string | undefined;
  private hostClusterAddress = "";
  /** Called when the host announces its Cluster service's address, by the watches waiting for it. */
  private readonly addressWaiters = new Set<() => void>();
  /** Set once serving has stopped: watches waiting for an address end. */
  private stopped = false;
  private clusterClient: ClusterClient | undefined;
  private clusterOverride: Cluster | undefined;

  constructor(options: SidecarOptions) {
    if (!/^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/.test(options.name ?? "")) {
      throw new Error(`polyop: the sidecar name ${JSON.stringify(options.name)} must be lower-case letters, digits and '-', at most 63`);
    }
    this.name = options.name;
    this.log = options.logger ?? jsonLogger({ name: "sidecar" });
    this.maxMessageSize = options.maxMessageSize ?? 64 << 20;
    this.clusterAddressOption = options.clusterAddress;
    this.serveDefaults = {
      ...(options.gracefulShutdownTimeoutMs !== undefined ? { gracefulShutdownTimeoutMs: options.gracefulShutdownTimeoutMs } : {}),
      ...(options.reflection !== undefined ? { reflection: options.reflection } : {}),
      ...(options.reconcileStream !== undefined ? { reconcileStream: options.reconcileStream } : {}),
    };
    if (Object.keys(this.serveDefaults).length) {
      deprecated("POLYOP_SIDECAR_SERVE_OPTIONS", `SidecarOptions ${Object.keys(this.serveDefaults).join(", ")}: pass them to serve or start, in ServeOptions`);
    }
    const env: SidecarEnv = {
      name: this.name,
      log: this.log,
      registry: this.registry,
      clusterFor: (signal, traceContext) => this.clusterFor(signal, traceContext),
    };
    this.service = sidecarService(env, (req) => this.answerDescribe(req));
  }

  /**
   * Registers a controller reconciling objects of options.for with fn. When
   * options.for is a typed model (defineKind's, or a kubernetes-models
   * class), fn receives its static type; otherwise name the type:
   * reconciler<Widget>(...). Name a finalizer in options.finalizer and
   * register its handler with finalizer(kind, fn).
   */
  reconciler<K extends TypedKindRef>(options: ControllerOptions<ObjectOf<K>> & { for: K }, fn: Reconciler<ObjectOf<K>>): this;
  reconciler<T = KubeResource>(options: ControllerOptions<T>, fn: Reconciler<T>): this;
  reconciler<T>(options: ControllerOptions<T>, fn: Reconciler<T>): this {
    // The deprecated handlers in the options still work, and say so.
    if (options.finalize) {
      deprecated("POLYOP_FINALIZE_OPTION", "the controller option finalize: register the handler with sidecar.finalizer(kind, fn), and name the finalizer in the option finalizer");
    }
    if (options.deleted) {
      deprecated("POLYOP_DELETED_OPTION", "the controller option deleted: register the handler with sidecar.deleted(kind, fn)");
    }
    this.registry.addController(options, fn);
    return this;
  }

  /**
   * Registers the clean-up of objects of kind being deleted: the controllers
   * reconciling kind that name a finalizer in their options (finalizer) call
   * fn, instead of the reconciler, for an object being deleted; once it
   * returns nothing, the host removes the finalizer.
   *
   *     sidecar
   *       .reconciler({ for: Widget, finalizer: "example.com/cleanup" }, reconcileWidget)
   *       .finalizer(Widget, async (widget, ctx) => { ... });
   *
   * Two controllers of one kind, each with its own finalizer, each get their
   * own handler: finalizer(kind, fn, { controller: name }).
   */
  finalizer<K extends TypedKindRef>(kind: K, fn: Finalizer<ObjectOf<K>>, options?: FinalizerOptions): this;
  finalizer<T>(kind: KindRef, fn: Finalizer<T>): this;
  finalizer<T>(kind: KindRef, fn: Finalizer<T>, options: FinalizerOptions): this;
  finalizer<T>(kind: KindRef, fn: Finalizer<T>, options: FinalizerOptions = {}): this {
    this.registry.addFinalizer(kind, fn as unknown as Finalizer<KubeResource>, options.controller);
    return this;
  }

  /**
   * Registers what to do when a reconciled object of kind is gone (no
   * finalizer held it): fn gets the context, whose key names the object.
   */
  deleted(kind: KindRef, fn: DeletedHandler): this {
    this.registry.addDeleted(kind, fn);
    return this;
  }

  /**
   * Registers a mutating admission webhook for options.for. A defineKind
   * model gives fn its static type, and refuses an object it does not accept
   * with its field errors before fn runs.
   */
  defaulter<K extends TypedKindRef>(options: WebhookOptions & { for: K }, fn: Defaulter<ObjectOf<K>>): this;
  defaulter<T = KubeResource>(options: WebhookOptions, fn: Defaulter<T>): this;
  defaulter<T>(options: WebhookOptions, fn: Defaulter<T>): this {
    this.registry.addWebhook(options, "defaulter").defaulter = fn as unknown as Defaulter<KubeResource>;
    return this;
  }

  /**
   * Registers a validating admission webhook for options.for: fn returns
   * warnings and throws DeniedError to refuse. A defineKind model gives fn
   * its static type, and refuses an object it does not accept with its field
   * errors before fn runs.
   */
  validator<K extends TypedKindRef>(options: WebhookOptions & { for: K }, fn: Validator<ObjectOf<K>>): this;
  validator<T = KubeResource>(options: WebhookOptions, fn: Validator<T>): this;
  /** @deprecated A validator returns warnings and throws DeniedError with its field errors (see Validator). */
  validator<T = KubeResource>(options: WebhookOptions, fn: FieldErrorValidator<T>): this;
  validator<T>(options: WebhookOptions, fn: Validator<T> | FieldErrorValidator<T>): this {
    this.registry.addWebhook(options, "validator").validator = fn as unknown as Validator<KubeResource>;
    return this;
  }

  /** Registers a CRD conversion webhook for a kind's versions. */
  converter(options: ConversionOptions, fn: Converter): this {
    this.registry.addConversion(options, fn);
    return this;
  }

  /**
   * Declares a cache index the host keeps on a kind (see IndexOptions):
   *
   *     sidecar.index({ for: "batch/v1/Job", name: ".metadata.controller",
   *                     fieldPath: ".metadata.ownerReferences[?(@.controller==true)].name" });
   */
  index(options: IndexOptions): this {
    if ("path" in options && options.path !== undefined) {
      deprecated("POLYOP_INDEX_PATH", "the index option path: name it fieldPath, as the protocol does");
    }
    this.registry.addIndex(options);
    return this;
  }

  /** Declares a kind for cached reads, with no controller (see CachedKindOptions). */
  cacheKind(options: CachedKindOptions): this {
    this.registry.addCachedKind(options);
    return this;
  }

  /** The indexes declared with index, for FakeCluster.indexAs. */
  get declaredIndexes(): DeclaredIndex[] {
    return [...this.registry.indexes.values()].map((ix) => ({
      apiVersion: ix.kind.group ? `${ix.kind.group}/${ix.kind.version}` : ix.kind.version,
      kind: ix.kind.kind,
      name: ix.name,
      ...(ix.value.case === "fieldPath" ? { fieldPath: ix.value.value } : { cel: ix.value.value ?? "" }),
    }));
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
      this.clusterClient = new ClusterClient(address, { maxMessageSize: this.maxMessageSize, log: this.log });
    }
    return this.clusterClient;
  }

  /**
   * Watches a kind through the host's Cluster service, as Cluster.watch
   * does, to keep a view of it or react to its changes outside reconciles.
   * It can be started before the sidecar serves: it waits (until
   * options.signal aborts, or serve stops) for the Cluster service's address,
   * which the host sends in its handshake. serve closes the client when it
   * stops, which ends the watch. The host must cache the kind: declare it with
   * cacheKind, or reconcile, own or watch it.
   *
   *     void (async () => {
   *       for await (const event of sidecar.watch<ConfigMap>(configMaps, { namespace: "shop", signal })) { ... }
   *     })();
   *     await sidecar.serve({ address, signal });
   */
  async *watch<T extends Manifest = KubeResource>(type: KindRef, options: WatchOptions = {}): AsyncGenerator<WatchEvent<T>, void, undefined> {
    if (!this.clusterOverride && !this.clusterAddressOption && !this.hostClusterAddress && !process.env[CLUSTER_ADDRESS_ENV]) {
      if (this.stopped) {
        return;
      }
      await new Promise<void>((resolve) => {
        const done = () => {
          this.addressWaiters.delete(done);
          options.signal?.removeEventListener("abort", done);
          resolve();
        };
        this.addressWaiters.add(done);
        options.signal?.addEventListener("abort", done, { once: true });
      });
      if (options.signal?.aborted || this.stopped) {
        return;
      }
    }
    yield* this.cluster.watch<T>(type, options);
  }

  /**
   * The sidecar's self-description, as Describe answers it; options are
   * those it serves with (by default, once it serves, those it was given).
   */
  describe(options: Pick<ServeOptions, "reconcileStream"> = this.serving ?? this.serveDefaults): DescribeResponse {
    return description(this.name, this.registry, { reconcileStream: options.reconcileStream ?? true });
  }

  /**
   * Serves in the background and resolves once listening, to the
   * RunningSidecar (its address; stop() stops it gracefully). Next to
   * SidecarService it serves grpc.health.v1.Health, SERVING while it serves.
   * It stops by itself when options.signal aborts.
   */
  async start(options: ServeOptions = {}): Promise<RunningSidecar> {
    if (this.registry.empty) {
      throw new Error("polyop: nothing is registered: register a reconciler, defaulter, validator or converter before serving");
    }
    if (this.registry.sealed) {
      throw new Error("polyop: the sidecar is already serving");
    }
    const resolved = resolveServeOptions({ ...this.serveDefaults, ...options });
    this.registry.sealed = true;
    this.serving = resolved;
    let running: RunningSidecar;
    try {
      running = await serve(this.service, this, resolved);
    } catch (err) {
      this.registry.sealed = false;
      this.serving = undefined;
      throw err;
    }
    const signal = resolved.signal;
    const stop = () => void running.stop();
    signal?.addEventListener("abort", stop, { once: true });
    if (signal?.aborted) {
      stop();
    }
    void running.closed.then(() => {
      signal?.removeEventListener("abort", stop);
      this.clusterClient?.close();
      this.stopped = true;
      for (const waiting of [...this.addressWaiters]) {
        waiting();
      }
    });
    return running;
  }

  /**
   * Serves until options.signal aborts, then stops gracefully: health
   * reports NOT_SERVING, new calls are refused, calls in flight finish (at
   * most gracefulShutdownTimeoutMs), the Cluster client closes. Resolves once
   * stopped.
   *
   *     await sidecar.serve({ signal: shutdownSignal() });
   */
  async serve(options?: ServeOptions): Promise<void>;
  /** @deprecated Pass the address in the options: serve({ address, signal }). */
  async serve(address: string, options?: { signal?: AbortSignal }): Promise<void>;
  async serve(first: ServeOptions | string = {}, legacy: { signal?: AbortSignal } = {}): Promise<void> {
    if (typeof first === "string") {
      deprecated("POLYOP_SERVE_ADDRESS", "sidecar.serve(address, { signal }): pass one ServeOptions, serve({ address, signal })", this.log);
    }
    const options: ServeOptions = typeof first === "string" ? { ...legacy, address: first } : first;
    const running = await this.start(options);
    await running.closed;
  }

  /**
   * Listens on address and serves until the returned RunningSidecar is stopped.
   *
   * @deprecated Use start({ address }).
   */
  async listen(address?: string): Promise<RunningSidecar> {
    deprecated("POLYOP_LISTEN", "sidecar.listen(address): use sidecar.start({ address })", this.log);
    return this.start(address === undefined ? {} : { address });
  }

  /** Answers Describe: remembers the Cluster service's address the host sent, and describes the sidecar. */
  private answerDescribe(req: DescribeRequest): DescribeResponse {
    if (req.protocolVersion !== PROTOCOL_VERSION) {
      this.log.info("The host speaks another protocol version; answering anyway, the host decides", {
        hostProtocolVersion: ProtocolVersion[req.protocolVersion] ?? req.protocolVersion,
        protocolVersion: ProtocolVersion[PROTOCOL_VERSION],
      });
    }
    this.hostClusterAddress = req.clusterAddress;
    if (req.clusterAddress) {
      for (const announced of [...this.addressWaiters]) {
        announced();
      }
    }
    this.log.info("Described the sidecar to the host", { hostVersion: req.hostVersion, clusterAddress: req.clusterAddress });
    return this.describe();
  }

  /** The Cluster for a call: bound to its signal and trace context when it is the host's. */
  private clusterFor(signal: AbortSignal, traceContext: Context): Cluster {
    const cluster = this.cluster;
    return cluster instanceof ClusterClient ? cluster.withSignal(signal, traceContext) : cluster;
  }
}
