import { create } from "@bufbuild/protobuf";
import type { Duration } from "@bufbuild/protobuf/wkt";
import { Code, ConnectError } from "@connectrpc/connect";
import { SpanStatusCode, type Span } from "@opentelemetry/api";

import type { MaybePromise } from "./context.js";
import { deprecated } from "./deprecation.js";
import { decode, type Call, type SidecarEnv } from "./dispatch.js";
import { TemporaryError, TerminalError } from "./errors.js";
import type { Logger } from "./log.js";
import {
  EventType,
  FinalizeResponseSchema,
  ReconcileResponseSchema,
  type Event,
  type Failure,
  type FinalizeRequest,
  type FinalizeResponse,
  type ReconcileRequest,
  type ReconcileResponse,
} from "./gen/polyop/v1alpha1/reconcile_pb.js";
import { kindKey, kindOf, type KindRef } from "./kinds.js";
import { encodeJSON, gvkOf, receive, type KubeResource, type ObjectKey, type Received, type TypeMeta } from "./objects.js";
import type { EventOptions, FinalizeResult, ReconcileContext, Result } from "./reconcile.js";
import type { ControllerEntry } from "./registry.js";
import { inServerSpan, SpanAttributes, type CallResult, type ServerSpan } from "./tracing.js";

// Reconcile and Finalize: the context a reconciler gets, and how its outcome
// (a Result, or a thrown error) becomes the response.

/** The context of a Reconcile or Finalize call, and the events its handler records through it. */
function reconcileContext(
  env: SidecarEnv,
  req: ReconcileRequest | FinalizeRequest,
  entry: ControllerEntry,
  signal: AbortSignal,
  observed: Array<Received<KubeResource>>,
  server: ServerSpan,
): { ctx: ReconcileContext; events: Event[] } {
  const kind = req.kind?.kind ? { group: req.kind.group, version: req.kind.version, kind: req.kind.kind } : entry.gvk;
  const key = { namespace: req.key?.namespace ?? "", name: req.key?.name ?? "" };
  // Made on first use: most reconciles log nothing.
  let log: Logger | undefined;
  const events: Event[] = [];
  const ctx: ReconcileContext = {
    signal,
    get log() {
      return (log ??= env.log.child({
        controller: req.controller,
        kind: kind.kind,
        namespace: key.namespace,
        name: key.name,
        ...(req.retries ? { retries: req.retries } : {}),
        ...server.logFields,
      }));
    },
    span: server.span,
    get cluster() {
      return env.clusterFor(signal, server.context);
    },
    controller: req.controller,
    kind,
    key,
    retries: req.retries,
    observedChildren(type: KindRef): never[] {
      const gvk = kindOf(type, `controller ${JSON.stringify(req.controller)}: observedChildren`);
      const want = kindKey(gvk);
      if (!entry.observed.has(want)) {
        throw new Error(
          `controller ${JSON.stringify(req.controller)} is sent no observed children of ${gvk.kind} (${gvk.group ? `${gvk.group}/` : ""}${gvk.version}): declare it in owns with sendObserved: true`,
        );
      }
      return observed.filter((c) => kindKey(gvkOf({ apiVersion: c.apiVersion ?? "", kind: c.kind ?? "" })) === want) as never[];
    },
    event(type: "Normal" | "Warning", reason: string, message: string, options: EventOptions | string = {}) {
      if (typeof options === "string") {
        deprecated("POLYOP_EVENT_ACTION_STRING", "ctx.event's action as a string: pass { action } as the fourth argument", env.log);
      }
      const action = typeof options === "string" ? options : (options.action ?? "");
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

/** The controller a request names, or the gRPC error the contract asks for. */
function controller(env: SidecarEnv, req: { controller: string; key?: { name: string } }, method: "Reconcile" | "Finalize"): ControllerEntry {
  if (env.registry.controllers.size === 0) {
    throw new ConnectError(`sidecar ${JSON.stringify(env.name)} registers no controller: it serves no ${method}`, Code.Unimplemented);
  }
  const entry = env.registry.controllers.get(req.controller);
  if (!entry) {
    throw new ConnectError(
      `sidecar ${JSON.stringify(env.name)} has no controller named ${JSON.stringify(req.controller)}; it has ${JSON.stringify([...env.registry.controllers.keys()])}`,
      Code.NotFound,
    );
  }
  if (!req.key?.name) {
    throw new ConnectError(`controller ${JSON.stringify(req.controller)}: the request has no object name`, Code.InvalidArgument);
  }
  return entry;
}

/** The span attributes of a Reconcile or Finalize call. */
function spanAttributes(req: ReconcileRequest | FinalizeRequest) {
  return {
    [SpanAttributes.controller]: req.controller,
    [SpanAttributes.kind]: req.kind?.kind ?? "",
    [SpanAttributes.namespace]: req.key?.namespace ?? "",
    [SpanAttributes.name]: req.key?.name ?? "",
    [SpanAttributes.retries]: req.retries,
  };
}

/** The polyop.result of a Reconcile or Finalize response; a failure also fails the span. */
function spanResult(resp: { error?: Failure | undefined; requeueAfter?: Duration | undefined }, span: Span): CallResult {
  if (resp.error) {
    span.setStatus({ code: SpanStatusCode.ERROR, message: resp.error.message });
    return resp.error.terminal ? "terminal_error" : "error";
  }
  return resp.requeueAfter ? "requeue" : "success";
}

/**
 * Answers a ReconcileRequest: the reconciler with the object, or the deleted
 * handler when the object is gone; the status it left on the object, its
 * events and its desired children (of the owned kinds only) go back. It runs
 * in a server span of the host's trace.
 */
export function reconcile(env: SidecarEnv, req: ReconcileRequest, call: Call): Promise<ReconcileResponse> {
  return inServerSpan(call, "Reconcile", spanAttributes(req), (server) => reconcileIn(env, req, call.signal, server), spanResult);
}

async function reconcileIn(env: SidecarEnv, req: ReconcileRequest, signal: AbortSignal, server: ServerSpan): Promise<ReconcileResponse> {
  const entry = controller(env, req, "Reconcile");
  const observed = req.observedChildren.map((c) => receive(decode<KubeResource>(c, `controller ${req.controller}: an observed child`)).obj);
  const { ctx, events } = reconcileContext(env, req, entry, signal, observed, server);
  if (req.object.length === 0) {
    const deleted = env.registry.deletedOf(entry);
    if (!deleted) {
      ctx.log.debug("The object is gone and the controller has no deleted handler; nothing to do");
      return create(ReconcileResponseSchema);
    }
    const resp = await outcome(ctx, () => deleted(ctx));
    return resp; // status, events and children of a gone object are ignored by the host
  }
  const obj = receive(decode<KubeResource>(req.object, `controller ${req.controller}: the object`)).obj;
  checkKey(obj, ctx.key, req.controller);
  const resp = await outcome(ctx, () => entry.reconcile(obj, ctx), entry.owned);
  const status = (obj as { status?: unknown }).status;
  if (status !== undefined && status !== null) {
    resp.status = encodeJSON(status);
  }
  resp.events = events;
  return resp;
}

/** Answers a FinalizeRequest with the controller's finalize function, in a server span of the host's trace. */
export function finalize(env: SidecarEnv, req: FinalizeRequest, call: Call): Promise<FinalizeResponse> {
  return inServerSpan(call, "Finalize", spanAttributes(req), (server) => finalizeIn(env, req, call.signal, server), spanResult);
}

async function finalizeIn(env: SidecarEnv, req: FinalizeRequest, signal: AbortSignal, server: ServerSpan): Promise<FinalizeResponse> {
  const entry = controller(env, req, "Finalize");
  const finalizeFn = env.registry.finalizerOf(entry);
  if (!finalizeFn) {
    if (![...env.registry.controllers.values()].some((c) => env.registry.finalizerOf(c))) {
      throw new ConnectError(`sidecar ${JSON.stringify(env.name)} declares no finalizer: it serves no Finalize`, Code.Unimplemented);
    }
    throw new ConnectError(`controller ${JSON.stringify(req.controller)} declares no finalizer`, Code.NotFound);
  }
  const { ctx, events } = reconcileContext(env, req, entry, signal, [], server);
  const obj = receive(decode<KubeResource>(req.object, `controller ${req.controller}: the object`)).obj;
  checkKey(obj, ctx.key, req.controller);
  const resp = await outcome(ctx, () => finalizeFn(obj, ctx));
  return create(FinalizeResponseSchema, { requeueAfter: resp.requeueAfter, error: resp.error, events });
}

/** Refuses an object that is not the one the request's key names. */
function checkKey(obj: Received<KubeResource>, key: ObjectKey, controller: string) {
  if (obj.metadata.name !== key.name || obj.metadata.namespace !== (key.namespace ?? "")) {
    throw new ConnectError(
      `controller ${JSON.stringify(controller)}: the object is ${obj.metadata.namespace}/${obj.metadata.name}, but the request is for ${key.namespace}/${key.name}`,
      Code.InvalidArgument,
    );
  }
}

/**
 * Runs a reconciler, finalizer or deleted handler and turns its outcome into a
 * response. Desired children are checked against owned, the controller's
 * owned kinds, when given, before they are encoded, once.
 */
async function outcome(
  ctx: ReconcileContext,
  fn: () => MaybePromise<Result | FinalizeResult | void>,
  owned?: ReadonlySet<string>,
): Promise<ReconcileResponse> {
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
  const children = result.desiredChildren ?? [];
  for (const { apiVersion, kind } of owned ? (children as Partial<TypeMeta>[]) : []) {
    if (!owned!.has(kindKey(gvkOf({ apiVersion: apiVersion ?? "", kind: kind ?? "" })))) {
      resp.error = failure(
        `a desired child is a ${kind} (${apiVersion}), which controller ${JSON.stringify(ctx.controller)} does not declare in owns`,
        { terminal: true },
      );
      return resp;
    }
  }
  resp.desiredChildren = children.map((c) => encodeJSON(c));
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
