import assert from "node:assert/strict";
import { describe, test } from "node:test";

import { discardLogger } from "@polyop/sidecar";
import { Harness } from "@polyop/sidecar/testing";

import { newSidecar } from "./sidecar.js";
import { configMapSyncs, labels, type ConfigMapSync, type ConfigMapSyncSpec } from "./types.js";

const harness = new Harness(newSidecar({ logger: discardLogger }));

function sync(spec: Partial<ConfigMapSyncSpec>): ConfigMapSync {
  return { ...configMapSyncs, metadata: { namespace: "ops", name: "ca" }, spec: { source: "ca-bundle", ...spec } };
}

describe("the defaulter", () => {
  test("fills in the target name and the source label, and sorts the targets", async () => {
    const out = await harness.default(sync({ targetNamespaces: ["b", "a", "b"] }));
    assert.equal(out.allowed, true);
    assert.equal(out.object.spec.targetName, "ca-bundle");
    assert.deepEqual(out.object.spec.targetNamespaces, ["a", "b"]);
    assert.equal(out.object.metadata.labels?.[labels.source], "ca-bundle");
    assert.deepEqual(out.warnings, ["spec.targetNamespaces listed a namespace twice; kept once"]);
  });

  test("keeps a target name that is set", async () => {
    const out = await harness.default(sync({ targetName: "ca", targetNamespaces: ["a"] }));
    assert.equal(out.object.spec.targetName, "ca");
    assert.deepEqual(out.warnings, []);
  });
});

describe("the validator", () => {
  const cases: Record<string, [Partial<ConfigMapSyncSpec>, string[]]> = {
    "a sync with targets is allowed": [{ targetNamespaces: ["team-a"] }, []],
    "a sync with only a selector is allowed": [{ namespaceSelector: "ca=yes" }, []],
    "if there is no target at all, then spec.targetNamespaces is required": [{}, ["spec.targetNamespaces: Required value"]],
    "if a target is not a namespace name, then it is invalid": [{ targetNamespaces: ["ok", "Not_OK"] }, ["spec.targetNamespaces[1]: Invalid value"]],
    "if a copy would overwrite the source, then it is invalid": [{ targetNamespaces: ["ops"] }, ["spec.targetNamespaces[0]: Invalid value"]],
    "a copy under another name in the source's namespace is allowed": [{ targetNamespaces: ["ops"], targetName: "ca-copy" }, []],
  };
  for (const [name, [spec, want]] of Object.entries(cases)) {
    test(name, async () => {
      const out = await harness.validate(sync(spec));
      assert.deepEqual(
        (out.denied?.fieldErrors ?? []).map((e) => `${e.field}: ${e.type === "Required" ? "Required value" : "Invalid value"}`),
        want,
      );
      assert.equal(out.allowed, want.length === 0);
    });
  }

  test("deletes are always allowed", async () => {
    assert.equal((await harness.validate(sync({}), { operation: "DELETE" })).allowed, true);
  });
});
