import assert from "node:assert/strict";
import { describe, test } from "node:test";

import { BadRequestError } from "./errors.js";
import { IndexDescriptionSchema } from "./gen/polyop/v1alpha1/describe_pb.js";
import { compilePath, OWNER_UID_INDEX } from "./indexes.js";
import type { KubeResource } from "./objects.js";
import { Sidecar } from "./sidecar.js";
import { FakeCluster, Harness } from "./testing.js";
import { create } from "@bufbuild/protobuf";

const pods = { apiVersion: "v1", kind: "Pod" };
const pod = (name: string, owner: string, uid: string): KubeResource =>
  ({
    ...pods,
    metadata: {
      name,
      namespace: "shop",
      labels: { "app.kubernetes.io/name": "web" },
      ownerReferences: [
        { apiVersion: "apps/v1", kind: "ReplicaSet", name: owner, uid, controller: true },
        { apiVersion: "v1", kind: "ConfigMap", name: "settings", uid: "u2" },
      ],
    },
    spec: { nodeName: "node-a", priority: 7, containers: [{ name: "app", image: "web:1" }, { name: "proxy", image: "envoy:2" }, { name: "again", image: "web:1" }] },
  }) as KubeResource;

describe("field paths", () => {
  const cases: Array<[string, string[]]> = [
    [".spec.nodeName", ["node-a"]],
    ["spec.nodeName", ["node-a"]],
    [".spec.priority", ["7"]],
    [".metadata.labels['app.kubernetes.io/name']", ["web"]],
    [".spec.containers[*].image", ["web:1", "envoy:2"]],
    [".spec.containers[1].name", ["proxy"]],
    [".metadata.ownerReferences[?(@.controller==true)].name", ["web-abc"]],
    [".metadata.ownerReferences[?(@.kind=='ConfigMap')].uid", ["u2"]],
    [".spec.missing", []],
  ];
  for (const [path, want] of cases) {
    test(`${path} gives what the host gives`, () => {
      assert.deepEqual(compilePath(path)(pod("web-1", "web-abc", "u1")), want);
    });
  }
  for (const path of ["", ".spec.", ".a..b", ".a[-1]", ".metadata.labels.app.kubernetes.io/name", ".a[?(@.b!=1)]"]) {
    test(`${JSON.stringify(path)} is refused`, () => {
      assert.throws(() => compilePath(path), /field path/);
    });
  }
});

function sidecar(): Sidecar {
  const s = new Sidecar({ name: "pods" });
  s.index({ ...pods, name: ".metadata.controller", fieldPath: ".metadata.ownerReferences[?(@.controller==true)].name" });
  s.index({ ...pods, name: "images", cel: "object.spec.containers.map(c, c.image)" });
  s.cacheKind({ ...pods, namespaces: ["shop"], labelSelector: "app=web" });
  s.reconciler<KubeResource & { status?: { pods: string[] } }>({ for: { apiVersion: "apps/v1", kind: "ReplicaSet" } }, async (rs, ctx) => {
    const list = await ctx.cluster.list(pods, { namespace: rs.metadata.namespace, fieldSelector: `.metadata.controller=${rs.metadata.name}` });
    rs.status = { pods: list.items.map((p) => p.metadata.name ?? "") };
    return {};
  });
  return s;
}

describe("declared indexes", () => {
  test("Describe carries the indexes and the cached kinds", () => {
    const got = sidecar().describe();
    assert.deepEqual(
      got.indexes.map((ix) => [ix.kind?.kind, ix.name, ix.value.case, ix.value.value]),
      [
        ["Pod", ".metadata.controller", "fieldPath", ".metadata.ownerReferences[?(@.controller==true)].name"],
        ["Pod", "images", "cel", "object.spec.containers.map(c, c.image)"],
      ],
    );
    assert.ok(got.indexes.every((ix) => ix.$typeName === create(IndexDescriptionSchema).$typeName));
    assert.deepEqual(
      got.cachedKinds.map((c) => [c.kind?.kind, c.namespaces, c.labelSelector, c.fieldSelector]),
      [["Pod", ["shop"], "app=web", ""]],
    );
  });

  test("a bad declaration is refused", () => {
    const s = new Sidecar({ name: "pods" });
    assert.throws(() => s.index({ ...pods, name: "x" } as never), /one of them/);
    assert.throws(() => s.index({ ...pods, name: "a=b", fieldPath: ".a" }), /without '='/);
    assert.throws(() => s.index({ ...pods, name: OWNER_UID_INDEX, fieldPath: ".a" }), /keeps this index itself/);
    assert.throws(() => s.index({ ...pods, name: "x", fieldPath: ".a..b" }), /field path/);
    s.index({ ...pods, name: "x", fieldPath: ".a" });
    assert.throws(() => s.index({ ...pods, name: "x", fieldPath: ".b" }), /already declared/);
    s.cacheKind(pods);
    assert.throws(() => s.cacheKind(pods), /already declared/);
  });

  test("a reconcile lists by a declared index from a FakeCluster", async () => {
    const s = sidecar();
    s.useCluster(new FakeCluster([pod("web-1", "web-abc", "u1"), pod("web-2", "other", "u3")]).indexAs(s));
    const got = await new Harness(s).reconcile({ apiVersion: "apps/v1", kind: "ReplicaSet", metadata: { name: "web-abc", namespace: "shop" } });
    assert.equal(got.error, undefined);
    assert.deepEqual(got.status, { pods: ["web-1"] });
  });

  test("a FakeCluster lists by the owner-UID index", async () => {
    const fake = new FakeCluster([pod("web-1", "web-abc", "u1")]);
    assert.deepEqual((await fake.list(pods, { fieldSelector: `${OWNER_UID_INDEX}=u1` })).items.map((p) => p.metadata.name), ["web-1"]);
    assert.deepEqual((await fake.list(pods, { fieldSelector: `${OWNER_UID_INDEX}=u2` })).items, []);
  });

  test("a FakeCluster lists by a CEL index only as a function", async () => {
    const fake = new FakeCluster([pod("web-1", "web-abc", "u1")]).indexAs(sidecar());
    await assert.rejects(fake.list(pods, { fieldSelector: "images=web:1" }), (err) => err instanceof BadRequestError && /does not evaluate the CEL of index "images"/.test(err.message));
    fake.index(pods, "images", (o) => ((o as unknown as { spec: { containers: Array<{ image: string }> } }).spec.containers.map((c) => c.image)));
    assert.deepEqual((await fake.list(pods, { fieldSelector: "images=envoy:2" })).items.map((p) => p.metadata.name), ["web-1"]);
    await assert.rejects(fake.list(pods, { fieldSelector: "spec.other=x" }), /index the field with index or indexAs/);
  });
});
