// A kind registered with its defineKind model checks admission objects
// against it: an object the model refuses is a denial with the model's field
// errors, as the API server's own validation answers, not a failed call.
import assert from "node:assert/strict";
import { describe, test } from "node:test";

import { Type } from "@sinclair/typebox";

import { defineKind, Kube } from "./crd.js";
import { discardLogger } from "./log.js";
import type { KubeResource } from "./objects.js";
import { Sidecar } from "./sidecar.js";
import { Harness } from "./testing.js";

const Widget = defineKind({
  group: "example.com",
  version: "v1",
  kind: "Widget",
  spec: Type.Object({
    size: Type.Integer({ minimum: 1 }),
    color: Type.Optional(Type.Union([Type.Literal("red"), Type.Literal("blue")])),
    ports: Type.Optional(Type.Array(Type.Object({ port: Type.Integer() }))),
    port: Type.Optional(Kube.IntOrString()),
  }),
  status: Kube.Status({}),
});

/** An object the model refuses: size is no integer, the second port has none. */
const malformed = {
  apiVersion: "example.com/v1",
  kind: "Widget",
  metadata: { namespace: "shop", name: "w" },
  spec: { size: "big", ports: [{ port: 80 }, {}], port: "http" },
} as unknown as KubeResource;

const wellFormed = { ...malformed, spec: { size: 2, ports: [{ port: 80 }], port: 8080 } } as unknown as KubeResource;

function sidecar(called: string[]) {
  return new Sidecar({ name: "widgets", logger: discardLogger })
    .defaulter({ for: Widget }, (w) => void called.push(`default ${w.spec.size}`))
    .validator({ for: Widget }, (w) => (called.push(`validate ${w.spec.size}`), []));
}

describe("admission against the kind's model", () => {
  for (const call of ["validate", "default"] as const) {
    test(`a ${call} call with an object the model refuses is denied with the model's field errors; the handler is not called`, async () => {
      const called: string[] = [];
      const out = await new Harness(sidecar(called))[call](malformed);
      assert.equal(out.allowed, false);
      assert.deepEqual(
        out.denied?.fieldErrors.map((e) => [e.field, e.type, e.badValue]),
        [
          ["spec.size", "Invalid", "big"],
          ["spec.ports[1].port", "Required", undefined],
        ],
      );
      assert.match(out.denied?.message ?? "", /does not match its Widget example.com\/v1 model/);
      assert.deepEqual(called, []);
    });
  }

  test("an object the model accepts reaches the handlers; Unsafe parts (IntOrString, metadata) are left to the API server", async () => {
    const called: string[] = [];
    const harness = new Harness(sidecar(called));
    assert.equal((await harness.default(wellFormed)).allowed, true);
    assert.equal((await harness.validate(wellFormed)).allowed, true);
    assert.deepEqual(called, ["default 2", "validate 2"]);
  });

  test("on delete, the stored object is not checked: a model that changed since must not keep it from going", async () => {
    const called: string[] = [];
    const out = await new Harness(sidecar(called)).validate(malformed, { operation: "DELETE" });
    assert.equal(out.allowed, true);
    assert.deepEqual(called, ["validate big"]);
  });

  test("a kind given as kind info or a string is not checked: there is no model", async () => {
    const called: string[] = [];
    const s = new Sidecar({ name: "widgets", logger: discardLogger }).validator({ for: "example.com/v1/Widget" }, () => (called.push("validate"), []));
    assert.equal((await new Harness(s).validate(malformed)).allowed, true);
    assert.deepEqual(called, ["validate"]);
  });
});
