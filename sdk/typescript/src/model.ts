import { Kind, OptionalKind, Type, type TSchema } from "@sinclair/typebox";
import { ValueErrorType } from "@sinclair/typebox/errors";
import { Value } from "@sinclair/typebox/value";

import type { DefinedKind } from "./crd.js";
import type { FieldError } from "./field.js";

// Checking an object against the typed model (a defineKind schema) it was
// registered with, for the admission webhooks: what the model refuses
// becomes field errors, and the request a denial, not a failed call.

/**
 * The schema that checks objects of model: the model with every
 * Type.Unsafe part (metadata, Kube.IntOrString, Kube.Condition, …) accepting
 * any value, as TypeBox's checker knows no Unsafe schema; the API server
 * validates those parts against the CRD.
 */
const checkable = new WeakMap<object, TSchema>();

function checkableSchema(model: DefinedKind): TSchema {
  let schema = checkable.get(model);
  if (!schema) {
    schema = withoutUnsafe(model);
    checkable.set(model, schema);
  }
  return schema;
}

function withoutUnsafe(node: unknown): TSchema {
  return clone(node) as TSchema;
  function clone(v: unknown): unknown {
    if (Array.isArray(v)) {
      return v.map(clone);
    }
    if (typeof v !== "object" || v === null) {
      return v;
    }
    const record = v as Record<string | symbol, unknown>;
    if (record[Kind] === "Unsafe") {
      return record[OptionalKind] === "Optional" ? Type.Optional(Type.Unknown()) : Type.Unknown();
    }
    const out: Record<string | symbol, unknown> = {};
    for (const key of Reflect.ownKeys(record)) {
      out[key] = clone(record[key]);
    }
    return out;
  }
}

/**
 * The field errors of obj against model, one per field at fault (the first
 * the model finds there), with the field's path as Kubernetes writes it
 * ("spec.items[0].name"). Formats TypeBox does not know (date-time, int64,
 * …) are left to the API server. None: the model accepts obj.
 */
export function modelErrors(model: DefinedKind, obj: unknown): FieldError[] {
  const errors: FieldError[] = [];
  const seen = new Set<string>();
  for (const e of Value.Errors(checkableSchema(model), obj)) {
    if (e.type === ValueErrorType.StringFormatUnknown) {
      continue;
    }
    const field = fieldPath(e.path);
    if (seen.has(field)) {
      continue;
    }
    seen.add(field);
    errors.push(
      e.type === ValueErrorType.ObjectRequiredProperty
        ? { field, type: "Required", detail: e.message }
        : { field, type: "Invalid", ...(e.value === undefined ? {} : { badValue: e.value }), detail: e.message },
    );
  }
  return errors;
}

/** A JSON pointer ("/spec/items/0/name") as a Kubernetes field path ("spec.items[0].name"). */
function fieldPath(pointer: string): string {
  let out = "";
  for (const raw of pointer.split("/").slice(1)) {
    const part = raw.replace(/~1/g, "/").replace(/~0/g, "~");
    if (/^\d+$/.test(part)) {
      out += `[${part}]`;
    } else if (/^[A-Za-z0-9_$-]+$/.test(part)) {
      out += out ? `.${part}` : part;
    } else {
      out += `[${JSON.stringify(part)}]`;
    }
  }
  return out || "<object>";
}
