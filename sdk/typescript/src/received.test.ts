// The objects the host sends a handler have metadata.name and
// metadata.namespace typed as present: strict code uses them as strings,
// without `!`. This file compiling under tsc strict is half of the test.
import assert from "node:assert/strict";
import { describe, test } from "node:test";

import type { AdmissionContext } from "./admission.js";
import type { Manifest, KubeObject, Received } from "./objects.js";
import type { ReconcileContext } from "./reconcile.js";
import { childrenComplete } from "./reconcile.js";
import { discardLogger } from "./log.js";
import { Sidecar } from "./sidecar.js";
import { Harness } from "./testing.js";

type Widget = KubeObject<{ size: number }, { owner?: string }>;
const widgets = { apiVersion: "example.com/v1", kind: "Widget" };
const configMaps = { apiVersion: "v1", kind: "ConfigMap" };

/** Labels are strings: a name typed string | undefined does not compile here. */
function labelsOf(obj: Received<Widget>): Record<string, string> {
  return { "example.com/name": obj.metadata.name, "example.com/namespace": obj.metadata.namespace };
}

describe("the objects handlers receive", () => {
  test("the reconciled object and the observed children have a name and a namespace", async () => {
    const seen: Array<Record<string, string>> = [];
    const sidecar = new Sidecar({ name: "widgets", logger: discardLogger }).reconciler<Widget>(
      { for: widgets, owns: [{ ...configMaps, sendObserved: true }] },
      (w, ctx: ReconcileContext) => {
        seen.push(labelsOf(w));
        for (const child of ctx.observedChildren(configMaps)) {
          seen.push({ child: `${child.metadata.namespace}/${child.metadata.name}` });
        }
        // A desired child the user builds may leave its namespace out: it defaults to the owner's.
        const desired: Manifest = { ...configMaps, metadata: { name: `${w.metadata.name}-settings`, labels: labelsOf(w) } };
        return childrenComplete([desired]);
      },
    );
    const out = await new Harness(sidecar).reconcile(
      { ...widgets, metadata: { namespace: "shop", name: "w" }, spec: { size: 1 } },
      { observedChildren: [{ ...configMaps, metadata: { namespace: "shop", name: "c" } }] },
    );
    assert.equal(out.error, undefined);
    assert.deepEqual(seen, [{ "example.com/name": "w", "example.com/namespace": "shop" }, { child: "shop/c" }]);
    assert.deepEqual(out.desiredChildren[0]?.metadata, { name: "w-settings", labels: { "example.com/name": "w", "example.com/namespace": "shop" } });
  });

  test("a cluster-scoped object's namespace is the empty string, not undefined", async () => {
    const namespaces: unknown[] = [];
    const sidecar = new Sidecar({ name: "widgets", logger: discardLogger }).reconciler<Widget>({ for: widgets }, (w) => {
      namespaces.push(w.metadata.namespace);
    });
    await new Harness(sidecar).reconcile({ ...widgets, metadata: { name: "w" }, spec: { size: 1 } });
    assert.deepEqual(namespaces, [""]);
  });

  test("admission objects have a name and a namespace, and a defaulter's answer leaves out those the request had not", async () => {
    const seen: string[] = [];
    const check = (w: Received<Widget>, ctx: AdmissionContext<Widget>) => {
      seen.push(`${ctx.operation} ${w.metadata.namespace}/${w.metadata.name} old=${ctx.oldObject?.metadata.name ?? "-"}`);
    };
    const sidecar = new Sidecar({ name: "widgets", logger: discardLogger })
      .defaulter<Widget>({ for: widgets }, (w, ctx) => {
        check(w, ctx);
        w.spec.size ||= 1;
      })
      .validator<Widget>({ for: widgets }, (w, ctx) => {
        check(w, ctx);
        return [];
      });
    const harness = new Harness(sidecar);
    // A create with generateName: the API server names the object after the mutating webhooks.
    const unnamed: Widget = { ...widgets, metadata: { generateName: "w-" }, spec: { size: 0 } };
    const defaulted = await harness.default(unnamed);
    assert.deepEqual(defaulted.object.metadata, { generateName: "w-" }, "no name or namespace added by the SDK");
    assert.equal(defaulted.object.spec.size, 1);
    const named: Widget = { ...widgets, metadata: { namespace: "shop", name: "w" }, spec: { size: 2 } };
    assert.equal((await harness.validate(named, { old: named })).allowed, true);
    assert.deepEqual(seen, ["CREATE / old=-", "UPDATE shop/w old=w"]);
  });
});
