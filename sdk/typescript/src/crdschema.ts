/**
 * TypeBox (JSON Schema) to a structural OpenAPI v3 schema, as the API server
 * requires of a CRD (apiextensions.k8s.io/v1): every node has one type,
 * nothing is a $ref, unions are only the ones Kubernetes names (enums,
 * nullable, int-or-string), and each keyword is one the API server knows.
 * What it would refuse is a SchemaError naming the field.
 *
 * The converter reads JSON Schema keywords, so Type.Unsafe and hand-written
 * schemas work too; TypeBox's Kind only sharpens its error messages.
 */

/** One node of a CRD's openAPIV3Schema (apiextensions.k8s.io/v1 JSONSchemaProps). */
export interface JSONSchemaProps {
  type?: "object" | "array" | "string" | "integer" | "number" | "boolean";
  description?: string;
  title?: string;
  default?: unknown;
  example?: unknown;
  nullable?: boolean;
  enum?: unknown[];
  format?: string;
  pattern?: string;
  minLength?: number;
  maxLength?: number;
  minimum?: number;
  maximum?: number;
  exclusiveMinimum?: boolean;
  exclusiveMaximum?: boolean;
  multipleOf?: number;
  items?: JSONSchemaProps;
  minItems?: number;
  maxItems?: number;
  properties?: Record<string, JSONSchemaProps>;
  required?: string[];
  additionalProperties?: JSONSchemaProps;
  minProperties?: number;
  maxProperties?: number;
  anyOf?: JSONSchemaProps[];
  "x-kubernetes-preserve-unknown-fields"?: boolean;
  "x-kubernetes-embedded-resource"?: boolean;
  "x-kubernetes-int-or-string"?: boolean;
  "x-kubernetes-list-type"?: "atomic" | "set" | "map";
  "x-kubernetes-list-map-keys"?: string[];
  "x-kubernetes-map-type"?: "atomic" | "granular";
  "x-kubernetes-validations"?: ValidationRule[];
}

/** A CEL validation rule (x-kubernetes-validations), as +kubebuilder:validation:XValidation writes it. */
export interface ValidationRule {
  rule: string;
  message?: string;
  messageExpression?: string;
  reason?: "FieldValueInvalid" | "FieldValueForbidden" | "FieldValueRequired" | "FieldValueDuplicate";
  fieldPath?: string;
  optionalOldSelf?: boolean;
}

/** A schema the API server would refuse in a CRD; path names the field, e.g. "spec.ports[*].name". */
export class SchemaError extends Error {
  readonly path: string;
  constructor(path: string, message: string) {
    super(`${path || "(the object)"}: ${message}`);
    this.name = "SchemaError";
    this.path = path;
  }
}

/** The formats the API server knows (k8s.io/apiextensions-apiserver's supported formats). */
export const stringFormats = new Set([
  "bsonobjectid", "uri", "email", "hostname", "ipv4", "ipv6", "cidr", "mac", "uuid", "uuid3", "uuid4", "uuid5",
  "isbn", "isbn10", "isbn13", "creditcard", "ssn", "hexcolor", "rgbcolor", "byte", "password", "date", "duration",
  "datetime", "date-time",
]);
const numberFormats: Record<string, Set<string>> = {
  integer: new Set(["int32", "int64"]),
  number: new Set(["float", "double", "int32", "int64"]),
};

// Keywords that mean nothing to a CRD and are dropped: identifiers, comments,
// and annotations the OpenAPI v3 subset of Kubernetes has no place for.
const dropped = new Set(["$id", "$schema", "$comment", "examples", "readOnly", "writeOnly", "uniqueItems", "additionalItems"]);
const common = new Set(["type", "description", "title", "default", "example", "nullable", "enum", "const", "x-kubernetes-validations"]);
const allowed: Record<string, Set<string>> = {
  string: new Set(["format", "pattern", "minLength", "maxLength"]),
  integer: new Set(["format", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"]),
  number: new Set(["format", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"]),
  boolean: new Set(),
  array: new Set(["items", "minItems", "maxItems", "x-kubernetes-list-type", "x-kubernetes-list-map-keys"]),
  object: new Set([
    "properties", "required", "additionalProperties", "patternProperties", "minProperties", "maxProperties",
    "x-kubernetes-map-type", "x-kubernetes-embedded-resource", "x-kubernetes-preserve-unknown-fields",
  ]),
};
// What a value that is a number only, or a string only, may be constrained by:
// an int-or-string node carries its members' constraints at its top.
const numberOnly = ["minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"];
const stringOnly = ["pattern", "minLength", "maxLength"];

type Schema = Record<string | symbol, unknown>;

const KindSymbol = Symbol.for("TypeBox.Kind");

/** A name for a schema in an error: its TypeBox kind, else its type. */
function describe(s: Schema): string {
  const kind = s[KindSymbol];
  if (typeof kind === "string") {
    return kind === "Literal" ? `Literal(${JSON.stringify(s.const)})` : `Type.${kind}`;
  }
  if ("const" in s) {
    return JSON.stringify(s.const);
  }
  return typeof s.type === "string" ? s.type : "a schema without a type";
}

function isSchema(s: unknown): s is Schema {
  return typeof s === "object" && s !== null && !Array.isArray(s);
}

/** The JSON type of a value, as a schema names it. */
function jsonType(v: unknown): string {
  if (v === null) {
    return "null";
  }
  if (Array.isArray(v)) {
    return "array";
  }
  if (typeof v === "number") {
    return Number.isInteger(v) ? "integer" : "number";
  }
  return typeof v;
}

const catchAllKeys = new Set(["^(.*)$", "^.*$", ".*", "^(.+)$", "^.+$"]);

/**
 * Converts schema, found at path (e.g. "spec"), to a structural schema.
 * Throws SchemaError for what the API server would refuse.
 */
export function structural(schema: unknown, path: string): JSONSchemaProps {
  if (!isSchema(schema)) {
    throw new SchemaError(path, `is not a schema: ${JSON.stringify(schema)}`);
  }
  const s = schema;
  const kind = s[KindSymbol];
  if ("$ref" in s || kind === "Ref" || kind === "This") {
    throw new SchemaError(
      path,
      `${describe(s)} refers to another schema ($ref ${JSON.stringify(s.$ref)}), and a CRD schema must be inline and cannot be recursive: use the schema itself in place of the reference; for a recursive type, cut the recursion at a fixed depth or use Kube.Any()`,
    );
  }
  if (Array.isArray(s.anyOf) || Array.isArray(s.oneOf)) {
    return union(s, path);
  }
  if (Array.isArray(s.allOf)) {
    return intersect(s, path);
  }
  for (const key of ["not", "if", "then", "else", "dependencies", "dependentSchemas", "dependentRequired", "prefixItems", "contains", "propertyNames", "$defs", "definitions"]) {
    if (key in s) {
      throw new SchemaError(path, `the keyword ${JSON.stringify(key)} (${describe(s)}) has no equivalent in a CRD schema: express the rule with x-kubernetes-validations (CEL)`);
    }
  }
  let type = s.type;
  if (Array.isArray(type)) {
    // ["string", "null"]: a nullable string.
    const types = (type as unknown[]).filter((t) => t !== "null");
    if (types.length !== 1) {
      throw new SchemaError(path, `the types ${JSON.stringify(type)} are not one type: a CRD field has exactly one type`);
    }
    return { ...structural({ ...s, type: types[0] }, path), ...(types.length < type.length ? { nullable: true } : {}) };
  }
  if (type === undefined && "const" in s) {
    type = jsonType(s.const);
  }
  if (type === undefined && Array.isArray(s.enum) && s.enum.length > 0) {
    const types = new Set(s.enum.map(jsonType));
    type = types.size === 1 ? [...types][0] : types.size === 2 && types.has("integer") && types.has("number") ? "number" : undefined;
  }
  if (type === undefined) {
    if (s["x-kubernetes-preserve-unknown-fields"] === true || s["x-kubernetes-int-or-string"] === true) {
      return annotations(s, path, s["x-kubernetes-int-or-string"] === true ? "int-or-string" : "any");
    }
    throw new SchemaError(
      path,
      `${describe(s)} has no type, and a structural schema needs one for every field: give the field a type, or accept any value with Kube.Any() (x-kubernetes-preserve-unknown-fields)`,
    );
  }
  switch (type as string) {
    case "string":
    case "integer":
    case "number":
    case "boolean":
      return scalar(s, type as "string" | "integer" | "number" | "boolean", path);
    case "array":
      return array(s, path);
    case "object":
      return object(s, path);
    case "null":
      throw new SchemaError(path, "Type.Null() alone is not a CRD type: make another type nullable with Type.Union([T, Type.Null()]) or Kube.Nullable(T)");
    case "Date":
      throw new SchemaError(path, 'Type.Date() is not JSON: use Type.String({ format: "date-time" }) (metav1.Time)');
    case "Uint8Array":
      throw new SchemaError(path, 'Type.Uint8Array() is not JSON: use Type.String({ format: "byte" }) (base64, as []byte in Go)');
    case "bigint":
      throw new SchemaError(path, 'Type.BigInt() is not JSON: use Type.Integer({ format: "int64" })');
    default:
      throw new SchemaError(path, `${describe(s)} (type ${JSON.stringify(type)}) cannot be expressed in a CRD schema`);
  }
}

/** The keywords every node may have, checked; kindOf says which type-specific ones are allowed. */
function annotations(s: Schema, path: string, kindOf: string): JSONSchemaProps {
  const extra = allowed[kindOf] ?? new Set<string>();
  const out: JSONSchemaProps = {};
  for (const [key, value] of Object.entries(s)) {
    if (dropped.has(key)) {
      if (key === "uniqueItems" && value === true) {
        throw new SchemaError(
          path,
          'uniqueItems is refused by the API server (its cost is quadratic): use Kube.SetList(items) (x-kubernetes-list-type: set), or Kube.MapList(items, ["key"]) for objects',
        );
      }
      continue;
    }
    if (kindOf === "int-or-string" && (numberOnly.includes(key) || stringOnly.includes(key) || key === "anyOf" || key === "x-kubernetes-int-or-string")) {
      continue;
    }
    if (kindOf === "any" && key === "x-kubernetes-preserve-unknown-fields") {
      continue;
    }
    if (!common.has(key) && !extra.has(key)) {
      throw new SchemaError(
        path,
        key.startsWith("x-kubernetes-")
          ? `${key} does not apply to ${kindOf === "any" ? "a field of any type" : `a field of type ${kindOf}`}`
          : `the keyword ${JSON.stringify(key)} is not one a CRD schema knows for type ${kindOf}`,
      );
    }
  }
  for (const key of ["description", "title"] as const) {
    if (s[key] !== undefined) {
      if (typeof s[key] !== "string") {
        throw new SchemaError(path, `${key} must be a string`);
      }
      out[key] = s[key];
    }
  }
  if (s.nullable === true) {
    out.nullable = true;
  }
  if (s["x-kubernetes-validations"] !== undefined) {
    out["x-kubernetes-validations"] = validations(s["x-kubernetes-validations"], path);
  }
  if (kindOf === "any") {
    out["x-kubernetes-preserve-unknown-fields"] = true;
  }
  if ("default" in s) {
    out.default = s.default;
  }
  if ("example" in s) {
    out.example = s.example;
  }
  return out;
}

function validations(v: unknown, path: string): ValidationRule[] {
  if (!Array.isArray(v) || v.some((r) => !isSchema(r) || typeof r.rule !== "string" || r.rule === "")) {
    throw new SchemaError(path, 'x-kubernetes-validations must be a list of rules, each with a CEL "rule"');
  }
  return v as ValidationRule[];
}

/** Checks that a default or enum value has the node's type. */
function checkValue(v: unknown, type: string, path: string, what: string, nullable: boolean) {
  const t = jsonType(v);
  if ((v === null && nullable) || t === type || (type === "number" && t === "integer")) {
    return;
  }
  throw new SchemaError(path, `the ${what} ${JSON.stringify(v)} is not of the field's type ${type}`);
}

function scalar(s: Schema, type: "string" | "integer" | "number" | "boolean", path: string): JSONSchemaProps {
  const out: JSONSchemaProps = { type, ...annotations(s, path, type) };
  if ("const" in s) {
    out.enum = [s.const];
  }
  if (Array.isArray(s.enum)) {
    out.enum = [...(s.enum as unknown[])];
  }
  for (const v of out.enum ?? []) {
    checkValue(v, type, path, "enum value", out.nullable === true);
  }
  if (typeof s.format === "string") {
    const formats = type === "string" ? stringFormats : numberFormats[type];
    if (!formats?.has(s.format)) {
      throw new SchemaError(
        path,
        `the format ${JSON.stringify(s.format)} is not one the API server knows for type ${type}${formats ? `: use one of ${[...formats].join(", ")}` : ""}`,
      );
    }
    out.format = s.format;
  }
  if (type === "string") {
    for (const key of stringOnly) {
      if (s[key] !== undefined) {
        (out as Record<string, unknown>)[key] = s[key];
      }
    }
    if (out.pattern !== undefined) {
      try {
        new RegExp(out.pattern);
      } catch (err) {
        throw new SchemaError(path, `the pattern ${JSON.stringify(out.pattern)} is not a regular expression: ${(err as Error).message}`);
      }
    }
  }
  if (type === "integer" || type === "number") {
    Object.assign(out, bounds(s, path));
  }
  if ("default" in out) {
    checkValue(out.default, type, path, "default", out.nullable === true);
    if (out.enum && !out.enum.some((e) => e === out.default)) {
      throw new SchemaError(path, `the default ${JSON.stringify(out.default)} is not one of the enum values ${JSON.stringify(out.enum)}`);
    }
  }
  return out;
}

/**
 * minimum, maximum and multipleOf, with JSON Schema's numeric
 * exclusiveMinimum/exclusiveMaximum (TypeBox's) turned into OpenAPI v3's
 * boolean form beside minimum/maximum.
 */
function bounds(s: Schema, path: string): JSONSchemaProps {
  const out: JSONSchemaProps = {};
  for (const [bound, exclusive] of [["minimum", "exclusiveMinimum"], ["maximum", "exclusiveMaximum"]] as const) {
    const b = s[bound];
    const e = s[exclusive];
    if (b !== undefined && typeof b !== "number") {
      throw new SchemaError(path, `${bound} must be a number`);
    }
    if (typeof e === "number") {
      if (b !== undefined) {
        throw new SchemaError(path, `${bound} and ${exclusive} are both set: keep one (${exclusive}: ${e} excludes ${e} itself)`);
      }
      out[bound] = e;
      out[exclusive] = true;
    } else {
      if (e === true && b === undefined) {
        throw new SchemaError(path, `${exclusive}: true needs ${bound}`);
      }
      if (b !== undefined) {
        out[bound] = b;
      }
      if (e === true) {
        out[exclusive] = true;
      }
    }
  }
  if (s.multipleOf !== undefined) {
    if (typeof s.multipleOf !== "number" || s.multipleOf <= 0) {
      throw new SchemaError(path, "multipleOf must be a number above 0");
    }
    out.multipleOf = s.multipleOf;
  }
  return out;
}

function array(s: Schema, path: string): JSONSchemaProps {
  const out: JSONSchemaProps = { type: "array", ...annotations(s, path, "array") };
  if (Array.isArray(s.items) || s[KindSymbol] === "Tuple") {
    throw new SchemaError(path, "a tuple (items as a list) is not a CRD type: use an object with named fields, or Type.Array of one type");
  }
  if (!isSchema(s.items)) {
    throw new SchemaError(path, "an array needs items, the schema of its elements");
  }
  out.items = structural(s.items, `${path}[*]`);
  for (const key of ["minItems", "maxItems"] as const) {
    if (s[key] !== undefined) {
      out[key] = s[key] as number;
    }
  }
  const listType = s["x-kubernetes-list-type"];
  const keys = s["x-kubernetes-list-map-keys"];
  if (listType !== undefined) {
    if (listType !== "atomic" && listType !== "set" && listType !== "map") {
      throw new SchemaError(path, `x-kubernetes-list-type must be "atomic", "set" or "map", not ${JSON.stringify(listType)}`);
    }
    out["x-kubernetes-list-type"] = listType;
  }
  const items = out.items;
  if (listType === "set") {
    const atomic = (items.type === "object" && items["x-kubernetes-map-type"] === "atomic") || (items.type === "array" && items["x-kubernetes-list-type"] === "atomic");
    if ((items.type === "object" || items.type === "array") && !atomic) {
      throw new SchemaError(path, "the items of a set list (x-kubernetes-list-type: set) must be scalars: for objects use Kube.MapList(items, keys)");
    }
  }
  if (listType === "map") {
    if (items.type !== "object" || !items.properties) {
      throw new SchemaError(path, "the items of a map list (x-kubernetes-list-type: map) must be objects with properties");
    }
    if (!Array.isArray(keys) || keys.length === 0 || keys.some((k) => typeof k !== "string")) {
      throw new SchemaError(path, "a map list (x-kubernetes-list-type: map) needs x-kubernetes-list-map-keys, the names of the fields that identify an item");
    }
    for (const key of keys as string[]) {
      const field = items.properties[key];
      if (!field) {
        throw new SchemaError(`${path}[*]`, `the list-map key ${JSON.stringify(key)} is not a field of the items`);
      }
      if (field.type === "object" || field.type === "array" || field.type === undefined) {
        throw new SchemaError(`${path}[*].${key}`, "a list-map key must be a scalar (string, integer, number or boolean)");
      }
      if (!items.required?.includes(key) && !("default" in field)) {
        throw new SchemaError(`${path}[*].${key}`, "a list-map key must be required or have a default");
      }
    }
    out["x-kubernetes-list-map-keys"] = [...(keys as string[])];
  } else if (keys !== undefined) {
    throw new SchemaError(path, 'x-kubernetes-list-map-keys needs x-kubernetes-list-type: "map"');
  }
  if ("default" in out) {
    checkValue(out.default, "array", path, "default", out.nullable === true);
  }
  return out;
}

function object(s: Schema, path: string): JSONSchemaProps {
  const out: JSONSchemaProps = { type: "object", ...annotations(s, path, "object") };
  const properties = s.properties;
  if (properties !== undefined) {
    if (!isSchema(properties)) {
      throw new SchemaError(path, "properties must be an object of schemas");
    }
    out.properties = {};
    for (const [name, prop] of Object.entries(properties)) {
      out.properties[name] = structural(prop, path ? `${path}.${name}` : name);
    }
    if (Object.keys(out.properties).length === 0) {
      delete out.properties;
    }
  }
  if (s.required !== undefined) {
    if (!Array.isArray(s.required) || s.required.some((r) => typeof r !== "string")) {
      throw new SchemaError(path, "required must be a list of field names");
    }
    for (const name of s.required as string[]) {
      if (!out.properties?.[name]) {
        throw new SchemaError(path, `the required field ${JSON.stringify(name)} is not among the properties`);
      }
    }
    if (s.required.length > 0) {
      out.required = [...(s.required as string[])];
    }
  }
  let values: unknown = s.additionalProperties;
  if (s.patternProperties !== undefined) {
    const patterns = isSchema(s.patternProperties) ? Object.entries(s.patternProperties) : [];
    const [pattern, schema] = patterns[0] ?? [];
    if (patterns.length !== 1 || !catchAllKeys.has(pattern!)) {
      throw new SchemaError(
        path,
        `a map whose keys are constrained (patternProperties ${JSON.stringify(Object.keys(s.patternProperties ?? {}))}) is not a CRD type: use Type.Record(Type.String(), T), and constrain the keys with x-kubernetes-validations (for example "self.all(k, k.matches('^[a-z]+$'))")`,
      );
    }
    if (values !== undefined && values !== false) {
      throw new SchemaError(path, "patternProperties and additionalProperties are both set: use Type.Record(Type.String(), T)");
    }
    values = schema;
  }
  if (values === true) {
    throw new SchemaError(path, "additionalProperties: true is not allowed in a CRD: keep unknown fields with Kube.PreserveUnknownFields() (x-kubernetes-preserve-unknown-fields)");
  }
  if (isSchema(values)) {
    if (out.properties) {
      throw new SchemaError(path, "an object cannot have both properties and additionalProperties (a map's values) in a CRD: use one or the other");
    }
    out.additionalProperties = structural(values, `${path}[*]`);
  }
  // additionalProperties: false is dropped: the API server prunes unknown fields anyway, and refuses the keyword.
  for (const key of ["minProperties", "maxProperties"] as const) {
    if (s[key] !== undefined) {
      out[key] = s[key] as number;
    }
  }
  const mapType = s["x-kubernetes-map-type"];
  if (mapType !== undefined) {
    if (mapType !== "atomic" && mapType !== "granular") {
      throw new SchemaError(path, `x-kubernetes-map-type must be "atomic" or "granular", not ${JSON.stringify(mapType)}`);
    }
    out["x-kubernetes-map-type"] = mapType;
  }
  if (s["x-kubernetes-preserve-unknown-fields"] === true) {
    out["x-kubernetes-preserve-unknown-fields"] = true;
  }
  if (s["x-kubernetes-embedded-resource"] === true) {
    if (!out.properties && !out["x-kubernetes-preserve-unknown-fields"]) {
      throw new SchemaError(path, "an embedded resource (x-kubernetes-embedded-resource) needs properties or x-kubernetes-preserve-unknown-fields: use Kube.EmbeddedResource()");
    }
    out["x-kubernetes-embedded-resource"] = true;
  }
  if ("default" in out) {
    checkValue(out.default, "object", path, "default", out.nullable === true);
  }
  return out;
}

/** The members of a union, nested unions flattened. */
function members(s: Schema): Schema[] {
  const list = (s.anyOf ?? s.oneOf) as unknown[];
  return list.flatMap((m) => (isSchema(m) && (Array.isArray(m.anyOf) || Array.isArray(m.oneOf)) ? members(m) : [m as Schema]));
}

/**
 * A union: literals of one type (an enum, TypeBox's Type.Enum and
 * Type.KeyOf too), T | null (nullable), integer | string (int-or-string).
 * Anything else is not structural.
 */
function union(s: Schema, path: string): JSONSchemaProps {
  const all = members(s);
  if (all.some((m) => !isSchema(m))) {
    throw new SchemaError(path, "a union member is not a schema");
  }
  const rest = all.filter((m) => m.type !== "null");
  const nullable = rest.length < all.length;
  const { anyOf: _a, oneOf: _o, ...own } = s;
  const with_ = (props: JSONSchemaProps): JSONSchemaProps => ({ ...props, ...(nullable ? { nullable: true } : {}) });
  if (rest.length === 0) {
    throw new SchemaError(path, "a union of nothing but null is not a CRD type");
  }
  if (rest.length === 1) {
    // T | null, with the union's own description and default on the top.
    return with_(structural({ ...rest[0], ...own }, path));
  }
  if (rest.every((m) => "const" in m)) {
    const values = rest.map((m) => m.const);
    const types = new Set(values.map(jsonType));
    const type = types.size === 1 ? [...types][0]! : types.size === 2 && types.has("integer") && types.has("number") ? "number" : undefined;
    if (type === undefined || type === "object" || type === "array") {
      throw new SchemaError(path, `an enum's values must all have one scalar type, not ${[...types].join(" and ")}: ${JSON.stringify(values)}`);
    }
    return with_(structural({ ...own, type, enum: values }, path));
  }
  const kinds = rest.map((m) => (typeof m.type === "string" ? m.type : undefined));
  const intOrString = rest.length === 2 && kinds.includes("string") && (kinds.includes("integer") || kinds.includes("number")) && rest.every((m) => !("const" in m) && !("enum" in m));
  if (intOrString) {
    const out: JSONSchemaProps = { ...annotations(own, path, "int-or-string"), "x-kubernetes-int-or-string": true, anyOf: [{ type: "integer" }, { type: "string" }] };
    for (const m of rest) {
      const { type: t, description: _d, title: _t, ...constraints } = m;
      const ok = t === "string" ? stringOnly : numberOnly;
      for (const key of Object.keys(constraints)) {
        if (!ok.includes(key) && !dropped.has(key) && key !== "default") {
          throw new SchemaError(path, `the ${String(t)} of an int-or-string may carry only ${ok.join(", ")}, not ${key}`);
        }
      }
      Object.assign(out, t === "string" ? pick(m, stringOnly) : bounds(m, path));
    }
    return with_(out);
  }
  throw new SchemaError(
    path,
    `a union of ${rest.map(describe).join(" and ")} is not a structural schema: a CRD field has exactly one type. Use one object with optional fields (and x-kubernetes-validations for a one-of rule), Kube.IntOrString() for an integer or a string, or Kube.Any() to accept any value`,
  );
}

function pick(s: Schema, keys: string[]): JSONSchemaProps {
  return Object.fromEntries(keys.filter((k) => s[k] !== undefined).map((k) => [k, s[k]]));
}

/** Type.Intersect of objects: one object with the properties of all. */
function intersect(s: Schema, path: string): JSONSchemaProps {
  const { allOf, ...own } = s;
  const parts = (allOf as unknown[]).map((m) => structural(m, path));
  const out: JSONSchemaProps = { type: "object", ...annotations({ ...own, type: "object" }, path, "object") };
  for (const [i, part] of parts.entries()) {
    if (part.type !== "object" || part.additionalProperties) {
      throw new SchemaError(path, `an intersection of anything but objects with properties is not a CRD type (member ${i + 1} is ${part.type ?? "untyped"})`);
    }
    for (const [name, prop] of Object.entries(part.properties ?? {})) {
      const existing = out.properties?.[name];
      if (existing && JSON.stringify(existing) !== JSON.stringify(prop)) {
        throw new SchemaError(`${path ? `${path}.` : ""}${name}`, "the members of an intersection define this field differently: define it once");
      }
      out.properties = { ...out.properties, [name]: prop };
    }
    for (const r of part.required ?? []) {
      out.required = [...new Set([...(out.required ?? []), r])];
    }
    if (part["x-kubernetes-preserve-unknown-fields"]) {
      out["x-kubernetes-preserve-unknown-fields"] = true;
    }
    if (part["x-kubernetes-validations"]) {
      out["x-kubernetes-validations"] = [...(out["x-kubernetes-validations"] ?? []), ...part["x-kubernetes-validations"]];
    }
  }
  return out;
}
