/**
 * Field errors for admission webhooks, after k8s.io/apimachinery's field
 * package: a validator returns them and the API server answers 422 Invalid
 * with one cause per error, as its own validation does.
 */

/** What is wrong with a field, as field.ErrorType. */
export type FieldErrorType =
  | "Invalid"
  | "Required"
  | "NotSupported"
  | "Forbidden"
  | "Duplicate"
  | "TooLong"
  | "TooShort"
  | "TooMany"
  | "TooFew"
  | "NotFound"
  | "TypeInvalid"
  | "Internal";

/** One invalid field. */
export interface FieldError {
  /** The field's path, for example "spec.targetNamespaces[0]". */
  field: string;
  type: FieldErrorType;
  /** The offending value; sent as JSON. Absent when not worth quoting. */
  badValue?: unknown;
  /** A human-readable detail. */
  detail?: string;
}

const describeType: Record<FieldErrorType, string> = {
  Invalid: "Invalid value",
  Required: "Required value",
  NotSupported: "Unsupported value",
  Forbidden: "Forbidden",
  Duplicate: "Duplicate value",
  TooLong: "Too long",
  TooShort: "Too short",
  TooMany: "Too many",
  TooFew: "Too few",
  NotFound: "Not found",
  TypeInvalid: "Invalid value",
  Internal: "Internal error",
};

/** Formats a field error the way field.Error.Error does: "spec.size: Invalid value: -1: must not be negative". */
export function formatFieldError(e: FieldError): string {
  let s = `${e.field}: ${describeType[e.type]}`;
  if (e.badValue !== undefined && e.type !== "Required" && e.type !== "Forbidden" && e.type !== "Internal") {
    s += `: ${JSON.stringify(e.badValue)}`;
  }
  return e.detail ? `${s}: ${e.detail}` : s;
}

/**
 * Constructors of field errors, named as apimachinery's field package names
 * them:
 *
 *     return [field.required("spec.source", "the ConfigMap to copy")];
 */
export const field = {
  invalid: (path: string, value: unknown, detail: string): FieldError => ({ field: path, type: "Invalid", badValue: value, detail }),
  required: (path: string, detail = ""): FieldError => ({ field: path, type: "Required", detail }),
  notSupported: (path: string, value: unknown, supported: readonly string[]): FieldError => ({
    field: path,
    type: "NotSupported",
    badValue: value,
    detail: supported.length ? `supported values: ${supported.map((v) => JSON.stringify(v)).join(", ")}` : "",
  }),
  forbidden: (path: string, detail: string): FieldError => ({ field: path, type: "Forbidden", detail }),
  duplicate: (path: string, value: unknown): FieldError => ({ field: path, type: "Duplicate", badValue: value }),
  tooLong: (path: string, value: unknown, max: number): FieldError => ({
    field: path,
    type: "TooLong",
    badValue: value,
    detail: `may not be more than ${max} bytes`,
  }),
  /** A string longer than max characters, as apimachinery's field.TooLongCharacters. */
  tooLongCharacters: (path: string, value: unknown, max: number): FieldError => ({
    field: path,
    type: "TooLong",
    badValue: value,
    detail: `may not be more than ${max} characters`,
  }),
  tooMany: (path: string, actual: number, max: number): FieldError => ({
    field: path,
    type: "TooMany",
    badValue: actual,
    detail: `must have at most ${max} items`,
  }),
  notFound: (path: string, value: unknown): FieldError => ({ field: path, type: "NotFound", badValue: value }),
  internal: (path: string, err: unknown): FieldError => ({ field: path, type: "Internal", detail: String(err) }),
};
