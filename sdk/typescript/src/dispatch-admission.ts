import { create } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";

import type { AdmissionContext, Operation } from "./admission.js";
import { deprecated } from "./deprecation.js";
import { decode, type Call, type SidecarEnv } from "./dispatch.js";
import { DeniedError } from "./errors.js";
import type { FieldError, FieldErrorType } from "./field.js";
import {
  DefaultResponseSchema,
  FieldErrorType as FieldErrorTypeProto,
  ValidateResponseSchema,
  type AdmissionRequest,
  type DefaultRequest,
  type DefaultResponse,
  type Denial,
  type ValidateRequest,
  type ValidateResponse,
} from "./gen/polyop/v1alpha1/admission_pb.js";
import type { Logger } from "./log.js";
import { kindKey } from "./kinds.js";
import { modelErrors } from "./model.js";
import { apiVersionOf, encodeJSON, receive, unreceive, type KubeResource, type Received } from "./objects.js";
import { operations, type WebhookEntry } from "./registry.js";
import { inServerSpan, SpanAttributes, type ServerSpan } from "./tracing.js";

// Default and Validate: the context of a defaulter or validator, and how what
// it returns or throws becomes the answer to the API server.

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

/** The webhook entry for a request, the context of its handler, and what the handler adds to the answer. */
function admission(env: SidecarEnv, req: AdmissionRequest | undefined, role: "defaulter" | "validator", signal: AbortSignal, server: ServerSpan) {
  if (!req) {
    throw new ConnectError("the request carries no AdmissionRequest", Code.InvalidArgument);
  }
  const gvk = { group: req.kind?.group ?? "", version: req.kind?.version ?? "", kind: req.kind?.kind ?? "" };
  const entry = env.registry.webhooks.get(kindKey(gvk));
  if (!entry?.[role]) {
    const method = role === "defaulter" ? "Default" : "Validate";
    if (![...env.registry.webhooks.values()].some((w) => w[role])) {
      throw new ConnectError(`sidecar ${JSON.stringify(env.name)} registers no ${role}: it serves no ${method}`, Code.Unimplemented);
    }
    throw new ConnectError(`sidecar ${JSON.stringify(env.name)} has no ${role} for ${gvk.kind} (${apiVersionOf(gvk)})`, Code.NotFound);
  }
  const key = { namespace: req.key?.namespace ?? "", name: req.key?.name ?? "" };
  const operation = (Object.keys(operations) as Operation[]).find((op) => operations[op] === req.operation) ?? "CREATE";
  const log = env.log.child({
    webhook: role,
    kind: gvk.kind,
    namespace: key.namespace,
    name: key.name,
    operation,
    uid: req.uid,
    ...server.logFields,
  });
  const oldObject = req.oldObject.length ? receive(decode<KubeResource>(req.oldObject, "the old object")).obj : undefined;
  const warnings: string[] = [];
  const ctx: AdmissionContext<KubeResource> = {
    signal,
    log,
    span: server.span,
    get cluster() {
      return env.clusterFor(signal, server.context);
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

/** The span attributes of an admission call. */
function spanAttributes(req: AdmissionRequest | undefined) {
  return {
    [SpanAttributes.kind]: req?.kind?.kind ?? "",
    [SpanAttributes.namespace]: req?.key?.namespace ?? "",
    [SpanAttributes.name]: req?.key?.name ?? "",
    "polyop.operation": (Object.keys(operations) as Operation[]).find((op) => operations[op] === req?.operation) ?? "",
  };
}

/** The polyop.result of an admission answer. */
function spanResult(resp: { denied?: Denial | undefined }) {
  return resp.denied ? "denied" : "success";
}

/** Answers a DefaultRequest with the kind's defaulter: the defaulted object, or a denial; in a server span of the host's trace. */
export function defaultObject(env: SidecarEnv, req: DefaultRequest, call: Call): Promise<DefaultResponse> {
  return inServerSpan(call, "Default", spanAttributes(req.request), (server) => defaultIn(env, req, call.signal, server), spanResult);
}

async function defaultIn(env: SidecarEnv, req: DefaultRequest, signal: AbortSignal, server: ServerSpan): Promise<DefaultResponse> {
  const { entry, ctx, warnings, log, request } = admission(env, req.request, "defaulter", signal, server);
  const fn = entry.defaulter!;
  const sent = request.object;
  const { obj, filled } = receive(decode<KubeResource>(sent, "the object"));
  try {
    checkModel(entry, obj);
    const defaulted = (await fn(obj, ctx)) ?? obj;
    // The name or namespace the SDK filled in is no default of the handler's.
    unreceive(defaulted, filled);
    const data = encodeJSON(defaulted);
    const unchanged = data.length === sent.length && data.every((b, i) => b === sent[i]);
    return create(DefaultResponseSchema, { object: unchanged ? new Uint8Array() : data, warnings });
  } catch (err) {
    throwIfCutOff(signal);
    return create(DefaultResponseSchema, { denied: denial(err, log), warnings });
  }
}

/** Answers a ValidateRequest with the kind's validator: allowed, or a denial; in a server span of the host's trace. */
export function validate(env: SidecarEnv, req: ValidateRequest, call: Call): Promise<ValidateResponse> {
  return inServerSpan(call, "Validate", spanAttributes(req.request), (server) => validateIn(env, req, call.signal, server), spanResult);
}

async function validateIn(env: SidecarEnv, req: ValidateRequest, signal: AbortSignal, server: ServerSpan): Promise<ValidateResponse> {
  const { entry, ctx, warnings, log, request } = admission(env, req.request, "validator", signal, server);
  const fn = entry.validator!;
  const obj = request.object.length ? receive(decode<KubeResource>(request.object, "the object")).obj : ctx.oldObject;
  if (!obj) {
    throw new ConnectError("the request carries no object", Code.InvalidArgument);
  }
  try {
    // On delete the object is the stored one: a model that has changed since must not keep it from going.
    if (request.object.length) {
      checkModel(entry, obj);
    }
    const returned: unknown[] = (await fn(obj, ctx)) ?? [];
    const fieldErrors = returned.filter(isFieldError);
    if (fieldErrors.length) {
      deprecated(
        "POLYOP_VALIDATOR_FIELD_ERRORS",
        "a validator returned field errors: return warnings, and throw DeniedError with the field errors to refuse",
        log,
      );
      throw new DeniedError("", fieldErrors);
    }
    for (const warning of returned) {
      if (typeof warning !== "string") {
        throw new TypeError(`a validator returns its warnings, strings; it returned ${JSON.stringify(warning)}: throw DeniedError to refuse`);
      }
      warnings.push(warning);
    }
    return create(ValidateResponseSchema, { warnings });
  } catch (err) {
    throwIfCutOff(signal);
    return create(ValidateResponseSchema, { denied: denial(err, log), warnings });
  }
}

/**
 * Refuses an object the kind's typed model does not accept, as the denial of
 * the model's field errors: what a handler typed by the model would not be
 * able to read is the request's fault, not the sidecar's.
 */
function checkModel(entry: WebhookEntry, obj: Received<KubeResource>): void {
  if (!entry.model) {
    return;
  }
  const errors = modelErrors(entry.model, obj);
  if (errors.length) {
    throw new DeniedError(`${obj.kind} ${obj.metadata.name || "(unnamed)"} does not match its ${entry.model.kind} ${entry.model.apiVersion} model`, errors);
  }
}

/** Whether v is a FieldError, as a validator of the deprecated shape returns. */
function isFieldError(v: unknown): v is FieldError {
  return typeof v === "object" && v !== null && typeof (v as FieldError).field === "string" && typeof (v as FieldError).type === "string";
}

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

/** The denial of a defaulter or validator that threw. */
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
