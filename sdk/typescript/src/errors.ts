import { Code, ConnectError } from "@connectrpc/connect";

import { formatFieldError, type FieldError } from "./field.js";
import { APIErrorSchema } from "./gen/polyop/v1alpha1/cluster_pb.js";
import { decodeJSON } from "./objects.js";

/**
 * An error that retrying cannot fix, as controller-runtime's TerminalError:
 * the host does not retry the object until its next event. Throw it from a
 * reconciler or a finalizer:
 *
 *     throw new TerminalError(`spec.size must not be negative, got ${size}`);
 *
 * Any other error thrown is transient: the host retries with exponential
 * backoff, or after the delay a TemporaryError names.
 */
export class TerminalError extends Error {
  override name = "TerminalError";

  /** Wraps an error (kept as the cause) or a message. */
  constructor(error: unknown) {
    super(error instanceof Error ? error.message : String(error), error instanceof Error ? { cause: error } : undefined);
  }
}

/**
 * A failure that says when to retry, as Kopf's TemporaryError(delay=...):
 * throw it from a reconciler or a finalizer, and the host retries the object
 * after retryAfter milliseconds instead of its exponential backoff:
 *
 *     throw new TemporaryError("the database is still starting", { retryAfter: 30_000 });
 *
 * The failure still counts as one: the next call's ctx.retries is one higher,
 * and a later failure without a delay backs off as if every failure in the row
 * had (see Failure in the protocol).
 */
export class TemporaryError extends Error {
  override name = "TemporaryError";
  /** When to retry, in milliseconds. */
  readonly retryAfter: number;

  /** Wraps an error (kept as the cause) or a message; options.retryAfter is in milliseconds, above 0. */
  constructor(error: unknown, options: { retryAfter: number }) {
    super(error instanceof Error ? error.message : String(error), error instanceof Error ? { cause: error } : undefined);
    const after = options?.retryAfter;
    if (typeof after !== "number" || !Number.isFinite(after) || after <= 0) {
      throw new RangeError(`TemporaryError retryAfter must be a duration above 0 in milliseconds, got ${String(after)}`);
    }
    this.retryAfter = after;
  }
}

/** The status a denial answers with, in place of the default. */
export interface DenialStatus {
  /** The HTTP status code, 400 to 599, for example 409. */
  code?: number;
  /** A Kubernetes status reason such as "Conflict"; defaults to the one Kubernetes gives code. */
  reason?: string;
}

/**
 * Refuses an admission request. Throw it from a defaulter or a validator;
 * with field errors the API server answers 422 Invalid with one cause per
 * field, without them 403 Forbidden with the message. A validator may also
 * simply return its field errors. A status replaces the default code and
 * reason, as a Go webhook's apierrors.NewConflict would:
 *
 *     throw new DeniedError("the port is taken by web-2", [], { code: 409 });
 */
export class DeniedError extends Error {
  override name = "DeniedError";
  readonly fieldErrors: readonly FieldError[];
  readonly code: number;
  readonly reason: string;

  constructor(message: string, fieldErrors: readonly FieldError[] = [], status: DenialStatus = {}) {
    const code = status.code ?? 0;
    if (code !== 0 && !(Number.isInteger(code) && code >= 400 && code <= 599)) {
      throw new RangeError(`DeniedError code ${code}: want an HTTP error code, 400 to 599`);
    }
    super(message || fieldErrors.map(formatFieldError).join(", "));
    this.fieldErrors = fieldErrors;
    this.code = code;
    this.reason = status.reason ?? "";
  }
}

/** A cause of an API server error, as metav1.StatusCause: for Invalid, one per field. */
export interface StatusCause {
  reason?: string;
  message?: string;
  field?: string;
}

/** The API server's metav1.Status, which the host sends with every error the API server answered. */
export interface Status {
  apiVersion?: string;
  kind?: string;
  status?: "Success" | "Failure";
  message?: string;
  /** A CamelCase reason: NotFound, AlreadyExists, Conflict, Invalid, Forbidden, … */
  reason?: string;
  details?: {
    name?: string;
    group?: string;
    kind?: string;
    uid?: string;
    causes?: StatusCause[];
    retryAfterSeconds?: number;
  };
  /** The HTTP status code. */
  code?: number;
}

/**
 * An error from the Cluster service. When the API server answered, status is
 * its metav1.Status and the error is an instance of the subclass naming its
 * reason (NotFoundError, ConflictError, …); otherwise (the host is
 * unreachable, the deadline passed, the request was malformed) it is a plain
 * ClusterError with the gRPC code.
 */
export class ClusterError extends Error {
  override name = "ClusterError";
  /** The gRPC status code. */
  readonly code: Code;
  /** The API server's status, when the error came from the API server. */
  readonly status: Status | undefined;

  constructor(message: string, code: Code, status?: Status, options?: { cause?: unknown }) {
    super(message, options);
    this.code = code;
    this.status = status;
  }

  /** The API server's reason, for example "NotFound"; "" when the error did not come from it. */
  get reason(): string {
    return this.status?.reason ?? "";
  }

  /** The causes the API server gave, for Invalid one per field. */
  get causes(): StatusCause[] {
    return this.status?.details?.causes ?? [];
  }
}

/** The object (or its kind's resource) does not exist: HTTP 404. */
export class NotFoundError extends ClusterError {
  override name = "NotFoundError";
}
/** An object of that name exists already: HTTP 409, reason AlreadyExists. */
export class AlreadyExistsError extends ClusterError {
  override name = "AlreadyExistsError";
}
/** The object changed since it was read (its resourceVersion is stale): HTTP 409, reason Conflict. */
export class ConflictError extends ClusterError {
  override name = "ConflictError";
}
/** The object failed validation: HTTP 422; the causes name the fields. */
export class InvalidError extends ClusterError {
  override name = "InvalidError";
}
/** The host's credentials do not allow the request: HTTP 403. */
export class ForbiddenError extends ClusterError {
  override name = "ForbiddenError";
}
/** The host's credentials were not accepted: HTTP 401. */
export class UnauthorizedError extends ClusterError {
  override name = "UnauthorizedError";
}
/** The API server asks the caller to slow down: HTTP 429. */
export class TooManyRequestsError extends ClusterError {
  override name = "TooManyRequestsError";
}
/**
 * What was asked for is gone: HTTP 410, reason Gone, or Expired for a list's
 * continue token or a watch's resourceVersion too old to serve.
 */
export class GoneError extends ClusterError {
  override name = "GoneError";
}
/** The request is malformed (a bad selector, a patch that does not apply): HTTP 400. */
export class BadRequestError extends ClusterError {
  override name = "BadRequestError";
}
/**
 * The API server failed or did not answer in time: HTTP 5xx, reasons
 * InternalError, ServiceUnavailable, ServerTimeout and Timeout. Retrying may
 * help.
 */
export class ServerError extends ClusterError {
  override name = "ServerError";
}

const byReason: Record<string, typeof ClusterError> = {
  NotFound: NotFoundError,
  AlreadyExists: AlreadyExistsError,
  Conflict: ConflictError,
  Invalid: InvalidError,
  Forbidden: ForbiddenError,
  Unauthorized: UnauthorizedError,
  TooManyRequests: TooManyRequestsError,
  Gone: GoneError,
  Expired: GoneError,
  BadRequest: BadRequestError,
  InternalError: ServerError,
  ServiceUnavailable: ServerError,
  ServerTimeout: ServerError,
  Timeout: ServerError,
};

const byHTTPCode: Record<number, typeof ClusterError> = {
  401: UnauthorizedError,
  403: ForbiddenError,
  404: NotFoundError,
  409: ConflictError,
  422: InvalidError,
  410: GoneError,
  429: TooManyRequestsError,
  400: BadRequestError,
};

/**
 * Translates an error from a Cluster service call into a ClusterError: the
 * APIError detail, when present, gives the API server's status, whose reason
 * (or, without one, HTTP code) picks the subclass.
 */
export function clusterError(err: unknown, what: string): ClusterError {
  const ce = ConnectError.from(err);
  let status: Status | undefined;
  for (const detail of ce.findDetails(APIErrorSchema)) {
    try {
      status = decodeJSON<Status>(detail.status);
      break;
    } catch {
      // A detail that does not decode says nothing; keep looking.
    }
  }
  if (status === undefined) {
    // A socket with no one listening on it is a host that is down (or not
    // yet up), as a refused TCP connection is.
    const code = ce.code === Code.Internal && systemCode(ce) === "ENOENT" ? Code.Unavailable : ce.code;
    return new ClusterError(`polyop cluster: ${what}: ${ce.rawMessage || Code[ce.code]}`, code, undefined, { cause: err });
  }
  const httpCode = status.code ?? 0;
  const Class = byReason[status.reason ?? ""] ?? byHTTPCode[httpCode] ?? (httpCode >= 500 && httpCode <= 599 ? ServerError : ClusterError);
  return new Class(status.message || ce.rawMessage, ce.code, status, { cause: err });
}

/** The code of the system error (ENOENT, ECONNREFUSED, …) among err's causes, if any. */
function systemCode(err: unknown): string | undefined {
  for (let e = err, depth = 0; e instanceof Error && depth < 5; e = e.cause, depth++) {
    const code = (e as { code?: unknown }).code;
    if (typeof code === "string") {
      return code;
    }
  }
  return undefined;
}

/**
 * Returns undefined for a NotFoundError and rethrows anything else, for reads
 * where absence is an answer:
 *
 *     const cm = await cluster.get<ConfigMap>(configMaps, key).catch(ignoreNotFound);
 */
export function ignoreNotFound(err: unknown): undefined {
  if (err instanceof NotFoundError) {
    return undefined;
  }
  throw err;
}
