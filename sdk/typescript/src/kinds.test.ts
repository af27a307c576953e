// Every registration takes the kind the same three ways: a typed model
// (defineKind's, or a kubernetes-models class), kind info, or a string.
import assert from "node:assert/strict";
import { describe, test } from "node:test";

import { Type } from "@sinclair/typebox";
import { Deployment } from "kubernetes-models/apps/v1/Deployment";

import { defineKind } from "./crd.js";
import { kindOf, type KindRef } from "./kinds.js";
import { discardLogger } from "./log.js";
import { Sidecar } from "./sidecar.js";

const Widget = defineKind({ group: "example.com", version: "v1", kind: "Widget", spec: Type.Object({ size: Type.Integer() }) });

describe("kinds", () => {
  const forms: Record<string, KindRef> = {
    "a defineKind model": Widget,
    "kind info as apiVersion and kind": { apiVersion: "example.com/v1", kind: "Widget" },
    "kind info as group, version and kind": { group: "example.com", version: "v1", kind: "Widget" },
    'a "group/version/Kind" string': "example.com/v1/Widget",
    'a "group/version, Kind=Kind" string, as Go prints it': "example.com/v1, Kind=Widget",
  };
  const widget = { group: "example.com", version: "v1", kind: "Widget" };

  for (const [form, kind] of Object.entries(forms)) {
    test(`every registration takes ${form}`, () => {
      const sidecar = new Sidecar({ name: "widgets", logger: discardLogger })
        .reconciler({ for: kind, finalizer: "example.com/cleanup", owns: [kind] }, () => {})
        .finalizer(kind, () => {})
        .deleted(kind, () => {})
        .defaulter({ for: kind }, () => {})
        .validator({ for: kind }, () => {})
        .converter({ for: kind, versions: ["v1", "v2"] }, (o) => o)
        .index({ for: kind, name: "size", fieldPath: ".spec.size" })
        .cacheKind({ for: kind });
      const d = sidecar.describe();
      const gvk = (k: { group: string; version: string; kind: string } | undefined) => ({ group: k?.group, version: k?.version, kind: k?.kind });
      assert.deepEqual(gvk(d.controllers[0]?.forKind), widget);
      assert.deepEqual(gvk(d.controllers[0]?.owns[0]?.kind), widget);
      assert.deepEqual(gvk(d.webhooks[0]?.kind), widget);
      assert.deepEqual([d.conversions[0]?.kind?.group, d.conversions[0]?.kind?.kind], ["example.com", "Widget"]);
      assert.deepEqual(gvk(d.indexes[0]?.kind), widget);
      assert.deepEqual(gvk(d.cachedKinds[0]?.kind), widget);
    });
  }

  test("a kubernetes-models class is a kind, in the core group too", () => {
    assert.deepEqual(kindOf(Deployment, "test"), { group: "apps", version: "v1", kind: "Deployment" });
    assert.deepEqual(kindOf("v1/ConfigMap", "test"), { group: "", version: "v1", kind: "ConfigMap" });
    assert.deepEqual(kindOf("v1, Kind=ConfigMap", "test"), { group: "", version: "v1", kind: "ConfigMap" });
  });

  test("a string that is no kind is refused, naming the forms", () => {
    assert.throws(() => new Sidecar({ name: "x", logger: discardLogger }).reconciler({ for: "Widget" }, () => {}), /neither "group\/version\/Kind"/);
    assert.throws(() => kindOf("a/b/c/d", "test"), /neither/);
  });
});
