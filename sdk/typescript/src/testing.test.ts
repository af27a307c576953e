import assert from "node:assert/strict";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, test } from "node:test";

import { connectCluster } from "./cluster.js";
import { AlreadyExistsError, ConflictError, NotFoundError } from "./errors.js";
import type { KubeObject } from "./objects.js";
import { FakeCluster, serveCluster } from "./testing.js";

const widgets = { apiVersion: "example.com/v1", kind: "Widget" };
type Widget = KubeObject<{ size: number }, { seen?: number }>;
const widget = (name: string, labels: Record<string, string> = {}): Widget => ({
  ...widgets,
  metadata: { namespace: "default", name, labels },
  spec: { size: 1 },
});

describe("FakeCluster", () => {
  test("keeps uid, resourceVersion and generation as the API server does", async () => {
    const cluster = new FakeCluster();
    const created = await cluster.create(widget("a"));
    assert.ok(created.metadata.uid);
    assert.equal(created.metadata.generation, 1);
    const specChanged = await cluster.update({ ...created, spec: { size: 2 } });
    assert.equal(specChanged.metadata.generation, 2);
    assert.notEqual(specChanged.metadata.resourceVersion, created.metadata.resourceVersion);
    const statusOnly = await cluster.update({ ...specChanged, spec: { size: 99 }, status: { seen: 2 } }, { subresource: "status" });
    assert.deepEqual([statusOnly.spec.size, statusOnly.status?.seen, statusOnly.metadata.generation], [2, 2, 2]);
    const labelled = await cluster.update({ ...statusOnly, metadata: { ...statusOnly.metadata, labels: { a: "b" } } });
    assert.equal(labelled.metadata.generation, 2, "metadata changes do not bump the generation");
    assert.equal(labelled.status?.seen, 2, "an update of the object keeps the status");
  });

  test("refuses what the API server refuses", async () => {
    const cluster = new FakeCluster([widget("a")]);
    await assert.rejects(cluster.create(widget("a")), AlreadyExistsError);
    await assert.rejects(cluster.get(widgets, { namespace: "default", name: "b" }), NotFoundError);
    await assert.rejects(cluster.update({ ...widget("a"), metadata: { namespace: "default", name: "a", resourceVersion: "0" } }), ConflictError);
    await assert.rejects(cluster.delete(widgets, { namespace: "default", name: "b" }), NotFoundError);
  });

  test("evicts a pod, records every subresource created, and has no other subresource to read", async () => {
    const pods = { apiVersion: "v1", kind: "Pod" };
    const cluster = new FakeCluster([{ ...pods, metadata: { namespace: "default", name: "web-0" } }, widget("a")]);
    const key = { namespace: "default", name: "web-0" };
    const answer = await cluster.createSubresource(pods, key, "eviction", { apiVersion: "policy/v1", kind: "Eviction" });
    assert.equal(answer.kind, "Status");
    await assert.rejects(cluster.get(pods, key), NotFoundError, "the evicted pod is gone");
    await assert.rejects(cluster.createSubresource(pods, key, "eviction", { apiVersion: "policy/v1", kind: "Eviction" }), NotFoundError);
    const token = { apiVersion: "authentication.k8s.io/v1", kind: "TokenRequest", spec: { audiences: ["a"] } };
    assert.deepEqual(await cluster.createSubresource(widgets, { namespace: "default", name: "a" }, "token", token), token);
    assert.deepEqual(
      cluster.subresources.map((s) => [s.kind, s.name, s.subresource]),
      [["Pod", "web-0", "eviction"], ["Widget", "a", "token"]],
    );
    await assert.rejects(cluster.get(widgets, { namespace: "default", name: "a" }, { subresource: "scale" }), NotFoundError);
    assert.equal((await cluster.get(widgets, { namespace: "default", name: "a" }, { subresource: "status" })).metadata.name, "a");
  });

  test("lists by namespace and label selector, and merge-patches", async () => {
    const cluster = new FakeCluster([widget("a", { team: "x" }), widget("b", { team: "y" }), { ...widget("c", { team: "x" }), metadata: { namespace: "other", name: "c", labels: { team: "x" } } }]);
    const names = async (opts: Parameters<FakeCluster["list"]>[1]) => (await cluster.list(widgets, opts)).items.map((w) => w.metadata.name);
    assert.deepEqual(await names({ labelSelector: "team=x" }), ["a", "c"]);
    assert.deepEqual(await names({ namespace: "default", labelSelector: "team!=x" }), ["b"]);
    assert.deepEqual(await names({ labelSelector: "!team" }), []);
    const patched = await cluster.patch<Widget>(widgets, { namespace: "default", name: "a" }, { spec: { size: 5 }, metadata: { labels: { team: null } } }, { type: "merge" });
    assert.deepEqual([patched.spec.size, patched.metadata.labels], [5, {}]);
  });

  test("served as a ClusterService, its errors reach a ClusterClient with their type", async (t) => {
    const dir = await mkdtemp(join(tmpdir(), "po-"));
    t.after(() => rm(dir, { recursive: true, force: true }));
    const address = `unix://${join(dir, "cluster.sock")}`;
    const fake = new FakeCluster([widget("a")]);
    const server = await serveCluster(fake, address);
    t.after(() => server.stop());
    const client = connectCluster(address);
    t.after(() => client.close());
    assert.equal((await client.get<Widget>(widgets, { namespace: "default", name: "a" })).spec.size, 1);
    await assert.rejects(client.create(widget("a")), AlreadyExistsError);
    await assert.rejects(client.get(widgets, { namespace: "default", name: "zz" }), NotFoundError);
    await client.recordEvent(widget("a"), { type: "Warning", reason: "R", message: "m" });
    assert.deepEqual(fake.events.map((e) => [e.type, e.reason, e.object.name]), [["Warning", "R", "a"]]);
  });

  test("served as a ClusterService, it takes writes addressed by kind and key, subresource creates included", async (t) => {
    const dir = await mkdtemp(join(tmpdir(), "po-"));
    t.after(() => rm(dir, { recursive: true, force: true }));
    const address = `unix://${join(dir, "cluster.sock")}`;
    const pods = { apiVersion: "v1", kind: "Pod" };
    const fake = new FakeCluster([widget("a"), { ...pods, metadata: { namespace: "default", name: "web-0" } }]);
    const server = await serveCluster(fake, address);
    t.after(() => server.stop());
    const client = connectCluster(address);
    t.after(() => client.close());
    const a = await client.get<Widget>(widgets, { namespace: "default", name: "a" }, { uncached: true });
    const updated = await client.update<Widget>({ ...a, spec: { size: 3 } });
    assert.equal(updated.spec.size, 3);
    await client.update<Widget>({ ...updated, status: { seen: 3 } }, { subresource: "status" });
    assert.equal(fake.all<Widget>(widgets)[0]?.status?.seen, 3);
    await client.apply<Widget>({ ...widget("b"), spec: { size: 2 } }, { force: true });
    assert.deepEqual(fake.all<Widget>(widgets).map((w) => [w.metadata.name, w.spec.size]), [["a", 3], ["b", 2]]);
    const eviction = await client.createSubresource(pods, { namespace: "default", name: "web-0" }, "eviction", { apiVersion: "policy/v1", kind: "Eviction" });
    assert.equal(eviction.kind, "Status");
    assert.deepEqual(fake.subresources.map((s) => [s.kind, s.namespace, s.name, s.subresource]), [["Pod", "default", "web-0", "eviction"]]);
    assert.deepEqual(fake.all(pods), [], "the evicted pod is gone");
  });

  test("watches a kind: the stored objects, synced, then every change, an object leaving the selection as deleted", async () => {
    const fake = new FakeCluster([widget("a", { app: "web" }), widget("b", { app: "db" }), { ...widget("c", { app: "web" }), metadata: { namespace: "other", name: "c", labels: { app: "web" } } }]);
    const abort = new AbortController();
    const events = fake.watch<Widget>(widgets, { namespace: "default", labelSelector: "app=web", signal: abort.signal })[Symbol.asyncIterator]();
    const next = async () => {
      const { value, done } = await events.next();
      return done ? "done" : value.type === "synced" ? "synced" : `${value.type} ${value.object.metadata.name} ${value.object.spec.size}`;
    };
    assert.deepEqual([await next(), await next()], ["added a 1", "synced"]);
    assert.equal(fake.watchCount, 1);

    const a = await fake.get<Widget>(widgets, { namespace: "default", name: "a" });
    await fake.update({ ...a, spec: { size: 2 } });
    await fake.create(widget("d", { app: "web" }));
    await fake.create(widget("e", { app: "db" })); // not selected
    await fake.patch(widgets, { namespace: "default", name: "b" }, { metadata: { labels: { app: "web" } } }, { type: "merge" });
    await fake.patch(widgets, { namespace: "default", name: "d" }, { metadata: { labels: { app: "db" } } }, { type: "merge" });
    await fake.delete(widgets, { namespace: "default", name: "a" });
    assert.deepEqual(
      [await next(), await next(), await next(), await next(), await next()],
      ["modified a 2", "added d 1", "added b 1", "deleted d 1", "deleted a 2"],
    );

    const waiting = next();
    abort.abort();
    assert.equal(await waiting, "done", "aborting the signal ends the watch");
    assert.equal(fake.watchCount, 0);
  });

  test("breaking out of a watch's loop ends it; served as a ClusterService, a watch reaches ClusterClient.watch", async (t) => {
    const fake = new FakeCluster([widget("a")]);
    for await (const e of fake.watch(widgets)) {
      assert.equal(e.type, "added");
      break;
    }
    assert.equal(fake.watchCount, 0);

    const dir = await mkdtemp(join(tmpdir(), "po-"));
    t.after(() => rm(dir, { recursive: true, force: true }));
    const address = `unix://${join(dir, "cluster.sock")}`;
    const server = await serveCluster(fake, address);
    t.after(() => server.stop());
    const client = connectCluster(address);
    t.after(() => client.close());
    const seen: string[] = [];
    for await (const e of client.watch<Widget>(widgets, { namespace: "default" })) {
      seen.push(e.type === "synced" ? "synced" : `${e.type} ${e.object.metadata.name}`);
      if (e.type === "synced") {
        await fake.create(widget("b"));
      }
      if (seen.length === 3) {
        break;
      }
    }
    assert.deepEqual(seen, ["added a", "synced", "added b"]);
  });
});
