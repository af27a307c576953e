import type { Context } from "@opentelemetry/api";

import { DEFAULT_ADDRESS } from "./address.js";
import { defaultObject, validate, type Defaulter, type Validator } from "./admission.js";
import { CLUSTER_ADDRESS_ENV, ClusterClient, type Cluster } from "./cluster.js";
import type { Call, SidecarEnv } from "./context.js";
import { convert, type Converter } from "./conversion.js";
import { description, PROTOCOL_VERSION } from "./describe.js";
import type { ConvertRequest, DefaultRequest, ValidateRequest } from "./gen/polyop/v1alpha1/admission_pb.js";
import { ProtocolVersion, type DescribeRequest, type DescribeResponse } from "./gen/polyop/v1alpha1/describe_pb.js";
import type { FinalizeRequest, ReconcileRequest } from "./gen/polyop/v1alpha1/reconcile_pb.js";
import type { CachedKindOptions, IndexOptions } from "./indexes.js";
import { jsonLogger, type Logger } from "./log.js";
import type { KubeResource, TypedKind, TypeMeta } from "./objects.js";
import { finalize, reconcile, type Reconciler } from "./reconcile.js";
import { Registry, type ControllerOptions, type ConversionOptions, type WebhookOptions } from "./registry.js";
import { listen, type RunningServer } from "./serve.js";
import type { WatchEvent, WatchOptions } from "./watch.js";

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
  /**
   * Serve gRPC server reflection of SidecarService and Health, so that
   * grpcurl lists and calls the sidecar without the proto files. Defaults to
   * on a unix socket, off on TCP.
   */
  reflection?: boolean;
  /**
   * Serve SidecarService.ReconcileStream and say so in Describe, so that the
   * host sends its Reconcile and Finalize calls as messages of one stream per
   * worker rather than as a gRPC call each: the same calls, the same handlers
   * and answers, at a lower cost per call. false serves the unary calls only
   * (the host then makes them). Defaults to true.
   */
  reconcileStream?: boolean;
}

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
  /** Whether listen serves gRPC server reflection; undefined: on a unix socket only. */
  readonly reflection: boolean | undefined;
  /** Whether listen serves ReconcileStream, and Describe says so. */
  readonly reconcileStream: boolean;

  private readonly registry = new Registry();
  private readonly clusterAddressOption: string | undefined;
  private hostClusterAddress = "";
  /** Called when the host announces its Cluster service's address, by the watches waiting for it. */
  private readonly addressWaiters = new Set<() => void>();
  /** Set once serve has stopped: watches waiting for an address end. */
  private stopped = false;
  private clusterClient: ClusterClient | undefined;
  private clusterOverride: Cluster | undefined;
  /** What the handlers of SidecarService see of this sidecar. */
  private readonly env: SidecarEnv;

  constructor(options: SidecarOptions) {
    if (!/^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/.test(options.name ?? "")) {
      throw new Error(`polyop: the sidecar name ${JSON.stringify(options.name)} must be lower-case letters, digits and '-', at most 63`);
    }
    this.name = options.name;
    this.log = options.logger ?? jsonLogger({ name: "sidecar" });
    this.maxMessageSize = options.maxMessageSize ?? 64 << 20;
    this.gracefulShutdownTimeoutMs = options.gracefulShutdownTimeoutMs ?? 30_000;
    this.clusterAddressOption = options.clusterAddress;
    this.reflection = options.reflection;
    this.reconcileStream = options.reconcileStream ?? true;
    this.env = {
      name: this.name,
      log: this.log,
      registry: this.registry,
      clusterFor: (signal, traceContext) => this.clusterFor(signal, traceContext),
    };
  }

  /**
   * Registers a controller reconciling objects of options.for with fn. When
   * options.for is a kind from defineKind ("@polyop/sidecar/crd"), fn
   * receives its static type; otherwise name the type: reconciler<Widget>(...).
   */
  reconciler<K extends TypedKind>(options: ControllerOptions<K["static"]> & { for: K }, fn: Reconciler<K["static"]>): this;
  reconciler<T extends KubeResource>(options: ControllerOptions<T>, fn: Reconciler<T>): this;
  reconciler<T extends KubeResource>(options: ControllerOptions<T>, fn: Reconciler<T>): this {
    this.registry.addController(options, fn);
    return this;
  }

  /** Registers a mutating admission webhook for options.for (a kind from defineKind gives fn its static type). */
  defaulter<K extends TypedKind>(options: WebhookOptions & { for: K }, fn: Defaulter<K["static"]>): this;
  defaulter<T extends KubeResource>(options: WebhookOptions, fn: Defaulter<T>): this;
  defaulter<T extends KubeResource>(options: WebhookOptions, fn: Defaulter<T>): this {
    this.registry.addWebhook(options, "defaulter").defaulter = fn as unknown as Defaulter<KubeResource>;
    return this;
  }

  /** Registers a validating admission webhook for options.for (a kind from defineKind gives fn its static type). */
  validator<K extends TypedKind>(options: WebhookOptions & { for: K }, fn: Validator<K["static"]>): this;
  validator<T extends KubeResource>(options: WebhookOptions, fn: Validator<T>): this;
  validator<T extends KubeResource>(options: WebhookOptions, fn: Validator<T>): this {
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
   *     sidecar.index({ apiVersion: "batch/v1", kind: "Job", name: ".metadata.controller",
   *                     path: ".metadata.ownerReferences[?(@.controller==true)].name" });
   */
  index(options: IndexOptions): this {
    this.registry.addIndex(options);
    return this;
  }

  /** Declares a kind for cached reads, with no controller (see CachedKindOptions). */
  cacheKind(options: CachedKindOptions): this {
    this.registry.addCachedKind(options);
    return this;
  }

  /** The indexes declared with index, for FakeCluster.indexAs. */
  get declaredIndexes(): IndexOptions[] {
    return [...this.registry.indexes.values()].map((ix) => ({
      apiVersion: ix.kind.group ? `${ix.kind.group}/${ix.kind.version}` : ix.kind.version,
      kind: ix.kind.kind,
      name: ix.name,
      ...(ix.value.case === "fieldPath" ? { path: ix.value.value } : { cel: ix.value.value ?? "" }),
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
   *     await sidecar.serve(address, { signal });
   */
  async *watch<T extends KubeResource = KubeResource>(type: TypeMeta, options: WatchOptions = {}): AsyncGenerator<WatchEvent<T>, void, undefined> {
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

  /** The sidecar's self-description, as Describe answers it. */
  describe(): DescribeResponse {
    return description(this.name, this.registry, { reconcileStream: this.reconcileStream });
  }

  /**
   * Listens on address and serves until the returned server is stopped. Next
   * to SidecarService it serves grpc.health.v1.Health, SERVING while it serves.
   */
  async listen(address: string = DEFAULT_ADDRESS): Promise<RunningServer> {
    if (this.registry.empty) {
      throw new Error("polyop: nothing is registered: register a reconciler, defaulter, validator or converter before serving");
    }
    if (this.registry.sealed) {
      throw new Error("polyop: the sidecar is already serving");
    }
    this.registry.sealed = true;
    try {
      return await listen(this, address);
    } catch (err) {
      this.registry.sealed = false;
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
      this.stopped = true;
      for (const waiting of [...this.addressWaiters]) {
        waiting();
      }
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
      if (req.clusterAddress) {
        for (const announced of [...this.addressWaiters]) {
          announced();
        }
      }
      this.log.info("Described the sidecar to the host", { hostVersion: req.hostVersion, clusterAddress: req.clusterAddress });
      return this.describe();
    },
    reconcile: (req: ReconcileRequest, call: Call) => reconcile(this.env, req, call),
    finalize: (req: FinalizeRequest, call: Call) => finalize(this.env, req, call),
    default: (req: DefaultRequest, call: Call) => defaultObject(this.env, req, call),
    validate: (req: ValidateRequest, call: Call) => validate(this.env, req, call),
    convert: (req: ConvertRequest, call: Call) => convert(this.env, req, call),
  };

  /** The Cluster for a call: bound to its signal and trace context when it is the host's. */
  private clusterFor(signal: AbortSignal, traceContext: Context): Cluster {
    const cluster = this.cluster;
    return cluster instanceof ClusterClient ? cluster.withSignal(signal, traceContext) : cluster;
  }
}
