import type { CallContext, MaybePromise } from "./context.js";
import type { FieldError } from "./field.js";
import type { GroupVersionKind, ObjectKey, Received } from "./objects.js";

// The handlers of admission webhooks: defaulters and validators, both called
// as (object, context).

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
  readonly oldObject: Received<T> | undefined;
  /** Returns a warning to the client (kubectl prints it). */
  warn(message: string): void;
}

/**
 * Sets defaults on obj in place (or returns a new object); ctx.warn returns
 * warnings. Throw DeniedError to refuse.
 */
export type Defaulter<T> = (obj: Received<T>, ctx: AdmissionContext<T>) => MaybePromise<T | void>;

/**
 * Returns warnings (none: allowed without a word); throw DeniedError, with
 * field errors, to refuse. On delete, obj is the old object.
 *
 *     (widget) => {
 *       if (widget.spec.size > 10) throw new DeniedError("", [field.tooMany("spec.size", widget.spec.size, 10)]);
 *       return widget.spec.size > 5 ? ["a widget above 5 is slow to start"] : [];
 *     }
 */
export type Validator<T> = (obj: Received<T>, ctx: AdmissionContext<T>) => MaybePromise<string[] | void>;

/**
 * A validator that returns its field errors.
 *
 * @deprecated Return warnings and throw DeniedError with the field errors
 * (see Validator). A returned array of field errors still denies, and logs a
 * deprecation warning.
 */
export type FieldErrorValidator<T> = (obj: Received<T>, ctx: AdmissionContext<T>) => MaybePromise<FieldError[] | void>;
