import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { Type } from "@sinclair/typebox";
import { Kube } from "./crdtypes.js";
import { SchemaError, structural } from "./crdschema.js";

// One test per supported marker: the TypeBox (or Kube) schema, and the
// structural schema fragment the CRD gets for it.

enum Color {
  Red = "red",
  Blue = "blue",
}

const markers: [string, unknown, unknown][] = [
  ["a required field and an optional one (+required, +optional)",
    Type.Object({ a: Type.String(), b: Type.Optional(Type.Integer()) }),
    { type: "object", properties: { a: { type: "string" }, b: { type: "integer" } }, required: ["a"] }],
  ["a default (+default)", Type.Integer({ default: 3 }), { type: "integer", default: 3 }],
  ["an object's default", Type.Object({ a: Type.Optional(Type.String()) }, { default: {} }), { type: "object", default: {}, properties: { a: { type: "string" } } }],
  ["a union of literals (+kubebuilder:validation:Enum)", Type.Union([Type.Literal("a"), Type.Literal("b")]), { type: "string", enum: ["a", "b"] }],
  ["a TypeScript enum (Type.Enum)", Type.Enum(Color), { type: "string", enum: ["red", "blue"] }],
  ["the keys of an object (Type.KeyOf)", Type.KeyOf(Type.Object({ x: Type.String(), y: Type.String() })), { type: "string", enum: ["x", "y"] }],
  ["a keyword enum", Type.String({ enum: ["x", "y"] }), { type: "string", enum: ["x", "y"] }],
  ["an integer enum", Type.Union([Type.Literal(1), Type.Literal(2)]), { type: "integer", enum: [1, 2] }],
  ["a single literal", Type.Literal("only"), { type: "string", enum: ["only"] }],
  ["minimum and maximum (+kubebuilder:validation:Minimum/Maximum)", Type.Number({ minimum: 0, maximum: 1.5 }), { type: "number", minimum: 0, maximum: 1.5 }],
  ["exclusive bounds (ExclusiveMinimum/ExclusiveMaximum)", Type.Integer({ exclusiveMinimum: 0, exclusiveMaximum: 10 }),
    { type: "integer", minimum: 0, exclusiveMinimum: true, maximum: 10, exclusiveMaximum: true }],
  ["multipleOf (+kubebuilder:validation:MultipleOf)", Type.Integer({ multipleOf: 5 }), { type: "integer", multipleOf: 5 }],
  ["lengths and a pattern (MinLength, MaxLength, Pattern)", Type.String({ minLength: 1, maxLength: 63, pattern: "^[a-z]+$" }),
    { type: "string", minLength: 1, maxLength: 63, pattern: "^[a-z]+$" }],
  ["a string format (+kubebuilder:validation:Format)", Type.String({ format: "date-time" }), { type: "string", format: "date-time" }],
  ["an integer format (int32)", Type.Integer({ format: "int32" }), { type: "integer", format: "int32" }],
  ["an integer format (int64)", Type.Integer({ format: "int64" }), { type: "integer", format: "int64" }],
  ["a number format (double)", Type.Number({ format: "double" }), { type: "number", format: "double" }],
  ["minItems and maxItems", Type.Array(Type.String(), { minItems: 1, maxItems: 3 }), { type: "array", items: { type: "string" }, minItems: 1, maxItems: 3 }],
  ["a set list (+listType=set)", Kube.SetList(Type.String()), { type: "array", items: { type: "string" }, "x-kubernetes-list-type": "set" }],
  ["a map list (+listType=map, +listMapKey)", Kube.MapList(Type.Object({ name: Type.String(), port: Type.Integer() }), ["name"]),
    { type: "array", items: { type: "object", properties: { name: { type: "string" }, port: { type: "integer" } }, required: ["name", "port"] },
      "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"] }],
  ["an atomic list (+listType=atomic)", Kube.AtomicList(Type.Integer()), { type: "array", items: { type: "integer" }, "x-kubernetes-list-type": "atomic" }],
  ["a map (Type.Record)", Type.Record(Type.String(), Type.Integer()), { type: "object", additionalProperties: { type: "integer" } }],
  ["a map (additionalProperties)", Type.Object({}, { additionalProperties: Type.String() }), { type: "object", additionalProperties: { type: "string" } }],
  ["minProperties and maxProperties", Type.Record(Type.String(), Type.String(), { minProperties: 1, maxProperties: 5 }),
    { type: "object", additionalProperties: { type: "string" }, minProperties: 1, maxProperties: 5 }],
  ["an atomic map (+mapType=atomic)", Type.Object({ a: Type.String() }, { "x-kubernetes-map-type": "atomic" }),
    { type: "object", properties: { a: { type: "string" } }, required: ["a"], "x-kubernetes-map-type": "atomic" }],
  ["additionalProperties: false is dropped", Type.Object({ a: Type.String() }, { additionalProperties: false }),
    { type: "object", properties: { a: { type: "string" } }, required: ["a"] }],
  ["preserve unknown fields (+kubebuilder:pruning:PreserveUnknownFields)", Kube.PreserveUnknownFields({ known: Type.Optional(Type.String()) }),
    { type: "object", properties: { known: { type: "string" } }, "x-kubernetes-preserve-unknown-fields": true }],
  ["any value (Kube.Any, apiextensionsv1.JSON)", Kube.Any({ description: "anything" }), { description: "anything", "x-kubernetes-preserve-unknown-fields": true }],
  ["an embedded resource (+kubebuilder:validation:EmbeddedResource)", Kube.EmbeddedResource(),
    { type: "object", "x-kubernetes-embedded-resource": true, "x-kubernetes-preserve-unknown-fields": true }],
  ["int-or-string (+kubebuilder:validation:XIntOrString)", Kube.IntOrString(),
    { "x-kubernetes-int-or-string": true, anyOf: [{ type: "integer" }, { type: "string" }] }],
  ["int-or-string from a union, constraints kept", Type.Union([Type.Integer({ minimum: 1 }), Type.String({ pattern: "^[0-9]+%$" })]),
    { "x-kubernetes-int-or-string": true, anyOf: [{ type: "integer" }, { type: "string" }], minimum: 1, pattern: "^[0-9]+%$" }],
  ["nullable (+nullable, Kube.Nullable)", Kube.Nullable(Type.String()), { type: "string", nullable: true }],
  ["nullable (T | null)", Type.Union([Type.Integer(), Type.Null()]), { type: "integer", nullable: true }],
  ["a nullable enum", Type.Union([Type.Literal("a"), Type.Literal("b"), Type.Null()]), { type: "string", enum: ["a", "b"], nullable: true }],
  ["descriptions", Type.Object({ a: Type.String({ description: "field" }) }, { description: "object" }),
    { type: "object", description: "object", properties: { a: { type: "string", description: "field" } }, required: ["a"] }],
  ["a CEL rule (+kubebuilder:validation:XValidation)", Type.Object({ a: Type.Integer(), b: Type.Integer() }, { "x-kubernetes-validations": [{ rule: "self.a <= self.b", message: "a must not exceed b" }] }),
    { type: "object", properties: { a: { type: "integer" }, b: { type: "integer" } }, required: ["a", "b"],
      "x-kubernetes-validations": [{ rule: "self.a <= self.b", message: "a must not exceed b" }] }],
  ["an intersection of objects (Type.Intersect)", Type.Intersect([Type.Object({ a: Type.String() }), Type.Object({ b: Type.Optional(Type.Boolean()) })]),
    { type: "object", properties: { a: { type: "string" }, b: { type: "boolean" } }, required: ["a"] }],
  ["a composite (Type.Composite)", Type.Composite([Type.Object({ a: Type.String() }), Type.Object({ b: Type.Boolean() })]),
    { type: "object", properties: { a: { type: "string" }, b: { type: "boolean" } }, required: ["a", "b"] }],
  ["a template literal", Type.TemplateLiteral("v${number}"), { type: "string", pattern: "^v(0|[1-9][0-9]*)$" }],
  ["identifiers and examples dropped", Type.String({ $id: "Name", examples: ["x"] }), { type: "string" }],
];

describe("structural: each supported marker", () => {
  for (const [name, schema, want] of markers) {
    test(name, () => {
      assert.deepEqual(structural(schema, "spec.field"), want);
    });
  }

  test("Kube.Status has observedGeneration and conditions keyed by type", () => {
    const got = structural(Kube.Status({ replicas: Type.Optional(Type.Integer()) }), "status");
    assert.deepEqual(Object.keys(got.properties!).sort(), ["conditions", "observedGeneration", "replicas"]);
    assert.deepEqual(got.properties!.observedGeneration, {
      type: "integer", format: "int64", minimum: 0, description: "The metadata.generation the status was last computed for.",
    });
    const conditions = got.properties!.conditions!;
    assert.equal(conditions["x-kubernetes-list-type"], "map");
    assert.deepEqual(conditions["x-kubernetes-list-map-keys"], ["type"]);
    assert.deepEqual(conditions.items!.required, ["lastTransitionTime", "message", "reason", "status", "type"]);
    assert.deepEqual(conditions.items!.properties!.status!.enum, ["True", "False", "Unknown"]);
  });
});

// What the API server would refuse, and the error naming the field path.
const refused: [string, unknown, string, RegExp][] = [
  ["Type.Any without preserve-unknown-fields", Type.Object({ x: Type.Any() }), "spec.x", /has no type.*Kube\.Any\(\)/],
  ["Type.Unknown", Type.Object({ x: Type.Unknown() }), "spec.x", /has no type/],
  ["a union of different types", Type.Object({ x: Type.Union([Type.String(), Type.Object({ a: Type.String() })]) }), "spec.x",
    /a union of Type\.String and Type\.Object is not a structural schema/],
  ["a union of objects", Type.Union([Type.Object({ a: Type.String() }), Type.Object({ b: Type.String() })]), "spec", /is not a structural schema/],
  ["a recursive type", Type.Object({ tree: Type.Recursive((This) => Type.Object({ children: Type.Array(This) })) }), "spec.tree.children[*]",
    /cannot be recursive/],
  ["a reference", Type.Object({ x: Type.Ref("Other") }), "spec.x", /must be inline/],
  ["an enum of mixed types", Type.Union([Type.Literal("a"), Type.Literal(1)]), "spec", /one scalar type/],
  ["uniqueItems", Type.Array(Type.String(), { uniqueItems: true }), "spec", /Kube\.SetList/],
  ["a tuple", Type.Object({ pair: Type.Tuple([Type.String(), Type.Integer()]) }), "spec.pair", /tuple/],
  ["a Date", Type.Object({ at: Type.Date() }), "spec.at", /format: "date-time"/],
  ["Type.Null alone", Type.Object({ n: Type.Null() }), "spec.n", /nullable/],
  ["an unknown format", Type.String({ format: "zipcode" }), "spec", /format "zipcode" is not one the API server knows/],
  ["an integer format on a string", Type.String({ format: "int32" }), "spec", /format "int32"/],
  ["both minimum and exclusiveMinimum", Type.Integer({ minimum: 1, exclusiveMinimum: 0 }), "spec", /keep one/],
  ["a set of objects", Kube.SetList(Type.Object({ a: Type.String() })), "spec", /must be scalars/],
  ["a map list without keys", Type.Array(Type.Object({ a: Type.String() }), { "x-kubernetes-list-type": "map" }), "spec", /list-map-keys/],
  ["a map-list key that is optional", Kube.MapList(Type.Object({ a: Type.Optional(Type.String()) }), ["a"]), "spec[*].a", /required or have a default/],
  ["a map-list key that is not a field", Kube.MapList(Type.Object({ a: Type.String() }), ["b"]), "spec[*]", /not a field/],
  ["a map keyed by numbers", Type.Record(Type.Number(), Type.String()), "spec", /Type\.Record\(Type\.String\(\), T\)/],
  ["properties with additionalProperties", Type.Object({ a: Type.String() }, { additionalProperties: Type.String() }), "spec", /both properties and additionalProperties/],
  ["additionalProperties: true", Type.Object({}, { additionalProperties: true }), "spec", /PreserveUnknownFields/],
  ["a keyword the API server does not know", Type.String({ contentEncoding: "base64" }), "spec", /"contentEncoding" is not one/],
  ["a list-type on a string", Type.String({ "x-kubernetes-list-type": "set" }), "spec", /does not apply to a field of type string/],
  ["a default of the wrong type", Type.Integer({ default: "3" }), "spec", /default "3" is not of the field's type integer/],
  ["a default outside the enum", Type.Union([Type.Literal("a"), Type.Literal("b")], { default: "c" }), "spec", /not one of the enum values/],
  ["an invalid pattern", Type.String({ pattern: "([" }), "spec", /not a regular expression/],
  ["an embedded resource with nothing to keep", Type.Object({}, { "x-kubernetes-embedded-resource": true }), "spec", /Kube\.EmbeddedResource/],
  ["a CEL rule without a rule", Type.Object({}, { "x-kubernetes-validations": [{ message: "m" }] }), "spec", /CEL "rule"/],
  ["a not", Type.Not(Type.String()), "spec", /"not".*x-kubernetes-validations/],
];

describe("structural: what the API server would refuse is an error naming the field", () => {
  for (const [name, schema, path, message] of refused) {
    test(name, () => {
      assert.throws(
        () => structural(schema, "spec"),
        (err: unknown) => {
          assert.ok(err instanceof SchemaError, String(err));
          assert.equal(err.path, path);
          assert.match(err.message, message);
          assert.ok(err.message.startsWith(`${path}: `), err.message);
          return true;
        },
      );
    });
  }
});
