import assert from "node:assert/strict";
import { describe, test } from "node:test";

import { create, fromBinary, toBinary, type DescMessage, type MessageInitShape } from "@bufbuild/protobuf";
import { BinaryWriter, WireType } from "@bufbuild/protobuf/wire";

import { DurationSchema } from "@bufbuild/protobuf/wkt";

import { CacheVersionSchema, ReconcileRequestSchema, ReconcileStreamRequestSchema } from "./gen/polyop/v1alpha1/reconcile_pb.js";
import { GroupVersionKindSchema, ObjectKeySchema } from "./gen/polyop/v1alpha1/types_pb.js";
import { decodeReconcileRequest, decodeReconcileStreamRequest, knownFields } from "./wire.js";

const json = (value: unknown) => new TextEncoder().encode(JSON.stringify(value));
const encode = (init: MessageInitShape<typeof ReconcileRequestSchema>) => toBinary(ReconcileRequestSchema, create(ReconcileRequestSchema, init));

const requests: Record<string, MessageInitShape<typeof ReconcileRequestSchema>> = {
  "an empty request": {},
  "a typical request": {
    controller: "maintenancewindow",
    kind: { group: "examples.polyop.dev", version: "v1", kind: "MaintenanceWindow" },
    key: { namespace: "production", name: "nightly" },
    object: json({ apiVersion: "examples.polyop.dev/v1", kind: "MaintenanceWindow", metadata: { name: "nightly" } }),
  },
  "a request with every field": {
    controller: "ünïcode-ctrl",
    kind: { group: "", version: "v1", kind: "ConfigMap" },
    key: { namespace: "", name: "cluster-scoped" },
    object: json({ big: "x".repeat(70_000) }),
    retries: 300,
    observedChildren: [json({ a: 1 }), new Uint8Array(0), json({ b: 2 })],
    cacheVersions: [
      { kind: { group: "apps", version: "v1", kind: "Deployment" }, resourceVersion: "123" },
      { resourceVersion: "" },
    ],
  },
  "a request with negative retries (an int32 on ten bytes)": { retries: -7, key: {} },
  "a request with empty embedded messages": { kind: {}, key: {}, cacheVersions: [{}] },
};

describe("decodeReconcileRequest", () => {
  for (const [name, init] of Object.entries(requests)) {
    test(`decodes ${name} as fromBinary does`, () => {
      const bytes = encode(init);
      assert.deepStrictEqual(decodeReconcileRequest(bytes), fromBinary(ReconcileRequestSchema, bytes));
    });
  }

  test("knows every field of the messages it decodes, as the schemas have them", () => {
    const schemas: Record<keyof typeof knownFields, DescMessage> = {
      "polyop.v1alpha1.ReconcileStreamRequest": ReconcileStreamRequestSchema,
      "google.protobuf.Duration": DurationSchema,
      "polyop.v1alpha1.ReconcileRequest": ReconcileRequestSchema,
      "polyop.v1alpha1.GroupVersionKind": GroupVersionKindSchema,
      "polyop.v1alpha1.ObjectKey": ObjectKeySchema,
      "polyop.v1alpha1.CacheVersion": CacheVersionSchema,
    };
    for (const [typeName, schema] of Object.entries(schemas)) {
      assert.deepEqual(
        schema.fields.map((f) => f.number),
        [...knownFields[typeName as keyof typeof knownFields]],
        `${typeName} has fields the decoders do not know: teach them (wire.ts)`,
      );
    }
  });

  test("if a field is unknown to it, then the message is decoded by fromBinary, the field kept", () => {
    const writer = new BinaryWriter();
    writer.raw(encode(requests["a typical request"]!));
    writer.tag(99, WireType.LengthDelimited).string("from a newer host");
    const bytes = writer.finish();
    const decoded = decodeReconcileRequest(bytes);
    assert.deepStrictEqual(decoded, fromBinary(ReconcileRequestSchema, bytes));
    assert.equal(decoded.controller, "maintenancewindow");
    assert.equal(toBinary(ReconcileRequestSchema, decoded).length, bytes.length, "the unknown field is kept");
  });

  test("if an embedded message comes twice, then it is merged as fromBinary merges it", () => {
    const writer = new BinaryWriter();
    writer.raw(encode({ kind: { group: "apps", version: "v1" } }));
    writer.raw(encode({ kind: { kind: "Deployment" } }));
    const bytes = writer.finish();
    assert.deepStrictEqual(decodeReconcileRequest(bytes), fromBinary(ReconcileRequestSchema, bytes));
    assert.equal(decodeReconcileRequest(bytes).kind?.group, "apps");
  });

  test("if the bytes are not a ReconcileRequest, then it throws, as fromBinary does", () => {
    const truncated = encode(requests["a typical request"]!).subarray(0, 40);
    assert.throws(() => fromBinary(ReconcileRequestSchema, truncated));
    assert.throws(() => decodeReconcileRequest(truncated));
    const badUTF8 = new BinaryWriter().tag(1, WireType.LengthDelimited).bytes(new Uint8Array([0xff, 0xfe])).finish();
    assert.throws(() => fromBinary(ReconcileRequestSchema, badUTF8));
    assert.throws(() => decodeReconcileRequest(badUTF8));
  });
});

const encodeStream = (init: MessageInitShape<typeof ReconcileStreamRequestSchema>) =>
  toBinary(ReconcileStreamRequestSchema, create(ReconcileStreamRequestSchema, init));

const streamRequests: Record<string, MessageInitShape<typeof ReconcileStreamRequestSchema>> = {
  "an empty request": {},
  "a typical Reconcile call": {
    id: 42n,
    call: { case: "reconcile", value: requests["a typical request"]! },
    timeout: { seconds: 30n },
    traceContext: { traceparent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", baggage: "polyop.reconcile_id=5f1c" },
  },
  "a Reconcile call with every field": {
    id: 2n ** 52n,
    call: { case: "reconcile", value: requests["a request with every field"]! },
    timeout: { seconds: 1n, nanos: 500_000_000 },
    traceContext: { traceparent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", tracestate: "ünï=1", "": "" },
  },
  "a Finalize call": { id: 1n, call: { case: "finalize", value: { controller: "c", key: { name: "n" }, object: json({}), retries: 3 } } },
  "an empty call and a zero timeout": { id: 0n, call: { case: "reconcile", value: {} }, timeout: {} },
  "an id beyond 2^53": { id: 2n ** 64n - 1n, call: { case: "reconcile", value: requests["a typical request"]! } },
  "a negative timeout": { id: 3n, timeout: { seconds: -1n, nanos: -5 } },
};

describe("decodeReconcileStreamRequest", () => {
  for (const [name, init] of Object.entries(streamRequests)) {
    test(`decodes ${name} as fromBinary does`, () => {
      const bytes = encodeStream(init);
      assert.deepStrictEqual(decodeReconcileStreamRequest(bytes), fromBinary(ReconcileStreamRequestSchema, bytes));
    });
  }

  test("if a field is unknown to it, in the request or in its call, then the message is decoded by fromBinary, the field kept", () => {
    const inner = new BinaryWriter();
    inner.raw(encode(requests["a typical request"]!));
    inner.tag(99, WireType.Varint).int32(7);
    for (const [name, bytes] of Object.entries({
      "in the request": new BinaryWriter().raw(encodeStream(streamRequests["a typical Reconcile call"]!)).tag(99, WireType.LengthDelimited).string("new").finish(),
      "in its call": new BinaryWriter().tag(1, WireType.Varint).uint64(5n).tag(2, WireType.LengthDelimited).bytes(inner.finish()).finish(),
    })) {
      const decoded = decodeReconcileStreamRequest(bytes);
      assert.deepStrictEqual(decoded, fromBinary(ReconcileStreamRequestSchema, bytes), name);
      assert.equal(toBinary(ReconcileStreamRequestSchema, decoded).length, bytes.length, `${name}: the unknown field is kept`);
    }
  });

  test("if the call comes twice, then it is merged or replaced as fromBinary does", () => {
    const twice = (a: MessageInitShape<typeof ReconcileStreamRequestSchema>, b: MessageInitShape<typeof ReconcileStreamRequestSchema>) =>
      new BinaryWriter().raw(encodeStream(a)).raw(encodeStream(b)).finish();
    for (const bytes of [
      twice({ call: { case: "reconcile", value: { controller: "a" } } }, { call: { case: "reconcile", value: { retries: 2 } } }),
      twice({ call: { case: "reconcile", value: { controller: "a" } } }, { call: { case: "finalize", value: { controller: "b" } } }),
      twice({ timeout: { seconds: 1n } }, { timeout: { nanos: 2 } }),
    ]) {
      assert.deepStrictEqual(decodeReconcileStreamRequest(bytes), fromBinary(ReconcileStreamRequestSchema, bytes));
    }
  });

  test("if the bytes are not a ReconcileStreamRequest, then it throws, as fromBinary does", () => {
    const truncated = encodeStream(streamRequests["a typical Reconcile call"]!).subarray(0, 60);
    assert.throws(() => fromBinary(ReconcileStreamRequestSchema, truncated));
    assert.throws(() => decodeReconcileStreamRequest(truncated));
  });
});
