/**
 * Write a polyop sidecar in TypeScript.
 *
 * The polyop host runs controller-runtime (informers, workqueues, leader
 * election, webhooks) and calls the sidecar over gRPC for every object to
 * reconcile, admit or convert. This package registers plain functions for
 * those calls and serves them:
 *
 *     import { Sidecar, markConditionTrue, READY, shutdownSignal, type Condition, type KubeObject } from "@polyop/sidecar";
 *
 *     type Widget = KubeObject<{ size: number }, { conditions?: Condition[] }>;
 *
 *     const sidecar = new Sidecar({ name: "widget-operator" });
 *     sidecar.reconciler<Widget>(
 *       { for: "example.com/v1/Widget", updateFilters: ["GenerationChanged"] },
 *       async (widget, ctx) => {
 *         widget.status ??= {};
 *         markConditionTrue(widget.status, READY, "Reconciled");
 *         ctx.event("Normal", "Reconciled", `widget ${widget.metadata.name} is ready`);
 *         return { requeueAfter: 10 * 60_000 };
 *       },
 *     );
 *     await sidecar.serve({ address: "unix:///var/run/polyop/sidecar.sock", signal: shutdownSignal() });
 *
 * Inside a reconciler: change obj.status in place and it is sent back (also
 * when the reconciler throws); throw TerminalError for what retrying cannot
 * fix, TemporaryError to say when to retry, anything else to be retried with
 * backoff; ctx.event records events; ctx.observedChildren(kind) lists the
 * children the host sent; ctx.cluster reads and writes other objects through
 * the host. Objects the host sends have metadata.name and
 * metadata.namespace typed as present (Received); desired children and
 * objects written are any Manifest, kubernetes-models' typed built-in kinds
 * included.
 *
 * "@polyop/sidecar/testing" has Harness, which calls a sidecar's functions
 * without a host, and FakeCluster, an in-memory Cluster. "@polyop/sidecar/crd"
 * declares kinds with TypeBox (defineKind), for their static types and their
 * CRDs (the polyop-crd command).
 */
export { DEFAULT_ADDRESS, parseAddress } from "./address.js";
export {
  CLUSTER_ADDRESS_ENV,
  CLUSTER_TLS_CA_FILE_ENV,
  CLUSTER_TLS_CERT_FILE_ENV,
  CLUSTER_TLS_KEY_FILE_ENV,
  ClusterClient,
  clusterTLSFromEnv,
  connectCluster,
  type ApplyOptions,
  type CallSignal,
  type Cluster,
  type ClusterClientOptions,
  type ClusterTLS,
  type DeleteOptions,
  type EventSpec,
  type GetOptions,
  type ListOptions,
  type ObjectList,
  type PatchOptions,
  type PatchType,
  type ReadSource,
  type ResolvedKind,
  type UpdateOptions,
  type WriteOptions,
} from "./cluster.js";
export { type WatchEvent, type WatchOptions } from "./watch.js";
export {
  findCondition,
  isConditionFalse,
  isConditionTrue,
  isConditionUnknown,
  markConditionFalse,
  markConditionTrue,
  markConditionUnknown,
  now,
  READY,
  removeCondition,
  setCondition,
  type Condition,
  type ConditionStatus,
  type Conditions,
  type NewCondition,
} from "./conditions.js";
export {
  AlreadyExistsError,
  BadRequestError,
  ClusterError,
  ConflictError,
  DeniedError,
  type DenialStatus,
  ForbiddenError,
  GoneError,
  ignoreNotFound,
  InvalidError,
  NotFoundError,
  ServerError,
  TemporaryError,
  TerminalError,
  TooManyRequestsError,
  UnauthorizedError,
  type Status,
  type StatusCause,
} from "./errors.js";
export { field, formatFieldError, type FieldError, type FieldErrorType } from "./field.js";
export { OWNER_UID_INDEX, type CachedKindOptions, type DeclaredIndex, type DeclaredKind, type IndexOptions } from "./indexes.js";
export { kindOf, type DataOf, type KindRef, type ModelClass, type ObjectOf, type TypedKindRef } from "./kinds.js";
export { discardLogger, jsonLogger, type LogFields, type Logger, type LogLevel } from "./log.js";
export {
  apiVersionOf,
  formatKey,
  gvkOf,
  keyOf,
  type GroupVersionKind,
  type KubeObject,
  type KubeResource,
  type Manifest,
  type ObjectKey,
  type ObjectMeta,
  type OwnerReference,
  type Received,
  type ReceivedMeta,
  type TypedKind,
  type TypeMeta,
} from "./objects.js";
export type { RunningServer, RunningSidecar, ServeOptions } from "./serve.js";
export type { AdmissionContext, Defaulter, FieldErrorValidator, Operation, Validator } from "./admission.js";
export type { CallContext, MaybePromise } from "./context.js";
export type { Converter } from "./conversion.js";
export { PROTOCOL_VERSION, SDK_NAME, SDK_VERSION } from "./version.js";
export {
  childrenComplete,
  requeueAfter,
  type DeletedHandler,
  type EventOptions,
  type FinalizeResult,
  type Finalizer,
  type ReconcileContext,
  type Reconciler,
  type Result,
} from "./reconcile.js";
export {
  type ControllerOptions,
  type ConversionOptions,
  type FinalizerOptions,
  type OwnedKind,
  type UpdateFilter,
  type WatchedKind,
  type WebhookOptions,
} from "./registry.js";
export { Sidecar, type SidecarOptions } from "./sidecar.js";
export { shutdownSignal } from "./signals.js";
