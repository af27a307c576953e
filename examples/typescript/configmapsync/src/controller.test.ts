import assert from "node:assert/strict";
import { describe, test } from "node:test";

import { ClusterError, discardLogger, findCondition, NotFoundError, kindOf, type KindRef, type KubeResource, type ListOptions, type Manifest, type ObjectList, type Received } from "@polyop/sidecar";
import { FakeCluster, Harness } from "@polyop/sidecar/testing";

import { resyncMs, retryFailedMs } from "./controller.js";
import { newSidecar } from "./sidecar.js";
import { ConfigMapKind, configMaps, configMapSyncs, copiesIndex, labels, type ConfigMap, type ConfigMapSync, type ConfigMapSyncSpec } from "./types.js";

// Fixture builders.
function sync(spec: Partial<ConfigMapSyncSpec> = {}, name = "ca"): ConfigMapSync {
  return {
    ...configMapSyncs,
    metadata: { namespace: "ops", name, uid: `uid-${name}`, generation: 3 },
    spec: { source: "ca-bundle", targetNamespaces: ["team-a", "team-b"], ...spec },
  };
}

function configMap(namespace: string, name: string, data: Record<string, string>, extraLabels: Record<string, string> = {}): ConfigMap {
  return { ...configMaps, metadata: { namespace, name, labels: extraLabels }, data };
}

function namespace(name: string, nsLabels: Record<string, string> = {}): KubeResource {
  return { apiVersion: "v1", kind: "Namespace", metadata: { name, labels: nsLabels } };
}

const source = () => configMap("ops", "ca-bundle", { "ca.crt": "CERT-1" });

function setup(...objects: Manifest[]) {
  const sidecar = newSidecar({ logger: discardLogger });
  // Indexed as the host indexes what the sidecar declares.
  const cluster = new FakeCluster(objects).indexAs(sidecar);
  const harness = new Harness(sidecar.useCluster(cluster));
  return { cluster, harness };
}

describe("reconcile", () => {
  test("reads and writes ConfigMaps as kubernetes-models types them: a copy of a typed source is a valid ConfigMap", async () => {
    const typedSource = new ConfigMapKind({ metadata: { namespace: "ops", name: "ca-bundle" }, data: { "ca.crt": "CERT-1" } });
    const { cluster, harness } = setup(typedSource);
    assert.equal((await harness.reconcile(sync())).error, undefined);
    // Typed by the kind: no type argument, and data is IConfigMap's.
    const copy = await cluster.get(ConfigMapKind, { namespace: "team-a", name: "ca-bundle" });
    const data: Record<string, string> | undefined = copy.data;
    assert.deepEqual(data, { "ca.crt": "CERT-1" });
    assert.equal(copy.metadata?.labels?.[labels.owner], "uid-ca");
    // kubernetes-models checks the object against the Kubernetes OpenAPI schema.
    assert.doesNotThrow(() => new ConfigMapKind(copy).validate());
  });

  test("copies the source into every target namespace and reports Ready", async () => {
    const { cluster, harness } = setup(source());
    const out = await harness.reconcile(sync());
    assert.equal(out.error, undefined);
    const copies = cluster.all<Received<ConfigMap>>(configMaps).filter((c) => c.metadata.namespace !== "ops");
    assert.deepEqual(
      copies.map((c) => [c.metadata.namespace, c.metadata.name, c.data, c.metadata.labels?.[labels.owner]]),
      [
        ["team-a", "ca-bundle", { "ca.crt": "CERT-1" }, "uid-ca"],
        ["team-b", "ca-bundle", { "ca.crt": "CERT-1" }, "uid-ca"],
      ],
    );
    assert.deepEqual(out.status?.syncedNamespaces, ["team-a", "team-b"]);
    assert.equal(out.status?.syncedCount, 2);
    assert.equal(out.status?.targetCount, 2);
    assert.equal(out.status?.observedGeneration, 3);
    const ready = findCondition(out.status, "Ready");
    assert.deepEqual([ready?.status, ready?.reason, ready?.observedGeneration], ["True", "Synced", 3]);
    assert.deepEqual(out.events.map((e) => [e.type, e.reason]), [["Normal", "Synced"]]);
    assert.equal(out.requeueAfter, resyncMs);
  });

  test("if nothing changed, then it writes nothing and records no event", async () => {
    const { cluster, harness } = setup(source());
    await harness.reconcile(sync());
    const writes: string[] = [];
    cluster.interceptors.push((verb) => void (verb === "get" || verb === "list" || writes.push(verb)));
    const out = await harness.reconcile(sync());
    assert.deepEqual(writes, []);
    assert.deepEqual(out.events, []);
  });

  test("if the source changes, then the copies follow", async () => {
    const { cluster, harness } = setup(source());
    await harness.reconcile(sync());
    await cluster.update({ ...(await cluster.get<ConfigMap>(configMaps, { namespace: "ops", name: "ca-bundle" })), data: { "ca.crt": "CERT-2" } });
    const out = await harness.reconcile(sync());
    const copy = await cluster.get<ConfigMap>(configMaps, { namespace: "team-b", name: "ca-bundle" });
    assert.deepEqual(copy.data, { "ca.crt": "CERT-2" });
    assert.match(out.events[0]?.message ?? "", /updated 2/);
  });

  test("if the source is missing, then Ready is False with SourceNotFound", async () => {
    const { cluster, harness } = setup();
    const out = await harness.reconcile(sync());
    assert.equal(out.error, undefined);
    assert.deepEqual([findCondition(out.status, "Ready")?.status, findCondition(out.status, "Ready")?.reason], ["False", "SourceNotFound"]);
    assert.deepEqual(out.events.map((e) => [e.type, e.reason]), [["Warning", "SourceNotFound"]]);
    assert.deepEqual(cluster.all(configMaps), []);
  });

  test("if a target holds a ConfigMap it does not manage, then it leaves it and reports the target failed", async () => {
    const { cluster, harness } = setup(source(), configMap("team-b", "ca-bundle", { mine: "yes" }));
    const out = await harness.reconcile(sync());
    assert.deepEqual(out.status?.syncedNamespaces, ["team-a"]);
    assert.deepEqual(out.status?.failedTargets?.map((f) => [f.namespace, f.reason]), [["team-b", "TargetExists"]]);
    assert.deepEqual([findCondition(out.status, "Ready")?.status, findCondition(out.status, "Ready")?.reason], ["False", "SyncFailed"]);
    assert.equal(out.requeueAfter, retryFailedMs);
    assert.deepEqual((await cluster.get<ConfigMap>(configMaps, { namespace: "team-b", name: "ca-bundle" })).data, { mine: "yes" });
  });

  test("if a target namespace does not exist, then that target fails and the others sync", async () => {
    const { cluster, harness } = setup(source());
    cluster.interceptors.push((verb, _type, key) => {
      if (verb === "create" && key?.namespace === "team-a") {
        throw new NotFoundError('namespaces "team-a" not found', 5, { reason: "NotFound", code: 404 });
      }
    });
    const out = await harness.reconcile(sync());
    assert.deepEqual(out.status?.syncedNamespaces, ["team-b"]);
    assert.deepEqual(out.status?.failedTargets?.map((f) => [f.namespace, f.reason]), [["team-a", "NamespaceNotFound"]]);
    assert.deepEqual(out.events.map((e) => e.reason), ["Synced", "SyncFailed"]);
  });

  test("prunes the copies of namespaces no longer targeted, and those of an old target name", async () => {
    const { cluster, harness } = setup(source());
    const first = await harness.reconcile(sync());
    // The host sends the object as it is, with the status the last reconcile wrote.
    const out = await harness.reconcile({ ...sync({ targetNamespaces: ["team-a"] }), status: first.status! });
    assert.deepEqual(cluster.all<Received<ConfigMap>>(configMaps).map((c) => `${c.metadata.namespace}/${c.metadata.name}`), ["ops/ca-bundle", "team-a/ca-bundle"]);
    assert.match(out.events[0]?.message ?? "", /pruned 1/);
    await harness.reconcile({ ...sync({ targetNamespaces: ["team-a"], targetName: "ca" }), status: out.status! });
    assert.deepEqual(cluster.all<Received<ConfigMap>>(configMaps).map((c) => `${c.metadata.namespace}/${c.metadata.name}`), ["ops/ca-bundle", "team-a/ca"]);
  });

  test("finds its copies by the declared index, from the host's cache, where it copies now or copied last time", async () => {
    const { cluster, harness } = setup(source(), configMap("team-b", "ca-bundle-old", {}, { [labels.owner]: "uid-ca" }));
    const lists: Array<[string, ListOptions]> = [];
    const list: (kind: KindRef, options?: ListOptions) => Promise<ObjectList<KubeResource>> = cluster.list.bind(cluster);
    cluster.list = (kind: KindRef, options: ListOptions = {}) => (lists.push([kindOf(kind, "list").kind, options]), list(kind, options));
    const out = await harness.reconcile({ ...sync({ targetNamespaces: ["team-a"] }), status: { syncedNamespaces: ["team-b"] } });
    assert.deepEqual(
      lists.map(([kind, o]) => [kind, o.namespace, o.fieldSelector, o.uncached]),
      [
        ["ConfigMap", "team-a", "copyOf=uid-ca", undefined],
        ["ConfigMap", "team-b", "copyOf=uid-ca", undefined],
      ],
    );
    assert.deepEqual(cluster.all<Received<ConfigMap>>(configMaps).map((c) => `${c.metadata.namespace}/${c.metadata.name}`), ["ops/ca-bundle", "team-a/ca-bundle"]);
    assert.match(out.events[0]?.message ?? "", /pruned 1/);
    assert.deepEqual(newSidecar().declaredIndexes, [copiesIndex]);
  });

  test("adds the namespaces the selector matches, and never copies onto its own source", async () => {
    const { cluster, harness } = setup(source(), namespace("ops", { ca: "yes" }), namespace("team-c", { ca: "yes" }), namespace("team-d"));
    const out = await harness.reconcile(sync({ targetNamespaces: ["ops"], namespaceSelector: "ca=yes" }));
    assert.deepEqual(out.status?.syncedNamespaces, ["team-c"]);
    assert.deepEqual(cluster.all<Received<ConfigMap>>(configMaps).map((c) => c.metadata.namespace), ["ops", "team-c"]);
    assert.deepEqual((await cluster.get<ConfigMap>(configMaps, { namespace: "ops", name: "ca-bundle" })).data, { "ca.crt": "CERT-1" });
  });

  test("if the cluster cannot be reached, then the error is transient and the status so far is kept", async () => {
    const { cluster, harness } = setup(source());
    cluster.interceptors.push((verb) => {
      if (verb === "list") {
        throw new ClusterError("polyop cluster: listing ConfigMap: connection refused", 14);
      }
    });
    const out = await harness.reconcile(sync());
    assert.deepEqual(out.error, { message: "polyop cluster: listing ConfigMap: connection refused", terminal: false });
    assert.equal(out.status?.sourceResourceVersion !== undefined, true);
  });
});

test("finalize deletes every copy", async () => {
  const { cluster, harness } = setup(source(), configMap("team-z", "other", {}, { [labels.owner]: "uid-other" }));
  await harness.reconcile(sync());
  const out = await harness.finalize({ ...sync(), metadata: { ...sync().metadata, deletionTimestamp: "2026-01-01T00:00:00Z" } });
  assert.equal(out.error, undefined);
  assert.deepEqual(cluster.all<Received<ConfigMap>>(configMaps).map((c) => `${c.metadata.namespace}/${c.metadata.name}`), ["ops/ca-bundle", "team-z/other"]);
  assert.deepEqual(out.events.map((e) => e.message), ["deleted 2 copies of ca-bundle"]);
});
