// ClusterClient.watch against a Watch stream served by grpc-js on a real unix
// socket: the events, resuming after an interruption, listing again after an
// expiry, the errors it does not get past, and cancellation.
import assert from "node:assert/strict";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, test, type TestContext } from "node:test";

import type { MessageInitShape } from "@bufbuild/protobuf";
import type { ServerWritableStream } from "@grpc/grpc-js";
import { Code } from "@connectrpc/connect";

import { CLUSTER_ADDRESS_ENV, connectCluster, type ClusterClient } from "./cluster.js";
import { ProtocolVersion } from "./gen/polyop/v1alpha1/describe_pb.js";
import { discardLogger } from "./log.js";
import { Sidecar } from "./sidecar.js";
import { ClusterError } from "./errors.js";
import { ClusterService, WatchEventType, type WatchRequest, type WatchResponseSchema } from "./gen/polyop/v1alpha1/cluster_pb.js";
import { serveGrpc, status } from "./grpcjs.testutil.js";
import type { KubeResource } from "./objects.js";
import type { WatchEvent } from "./watch.js";

const configMaps = { apiVersion: "v1", kind: "ConfigMap" };
type Call = ServerWritableStream<WatchRequest, MessageInitShape<typeof WatchResponseSchema>>;

/** A ConfigMap event as the host sends it. */
function event(type: WatchEventType, name: string, rv: string, data: Record<string, string> = {}) {
  const object = { ...configMaps, metadata: { namespace: "shop", name, resourceVersion: rv }, data };
  return { type, object: new TextEncoder().encode(JSON.stringify(object)), resourceVersion: rv };
}
const done = (rv: string) => ({ type: WatchEventType.INITIAL_LIST_DONE, resourceVersion: rv });
const bookmark = (rv: string) => ({ type: WatchEventType.BOOKMARK, resourceVersion: rv });

/** Ends a stream with a gRPC status, as the host does. */
function fail(call: Call, code: number, details: string) {
  call.emit("error", { code, details });
}

/**
 * Serves a Watch that answers its n-th call with script[n] (the last one
 * again after the end), and records the requests and how each call ended.
 */
async function watchHost(t: TestContext, script: Array<(call: Call) => void>) {
  const requests: WatchRequest[] = [];
  const cancelled: Array<Promise<void>> = [];
  const server = await serveGrpc(ClusterService, {
    watch: (call: Call) => {
      requests.push(call.request);
      cancelled.push(new Promise((resolve) => call.on("cancelled", () => resolve())));
      script[Math.min(requests.length, script.length) - 1]!(call);
    },
  });
  const cluster = connectCluster(server.address);
  t.after(async () => {
    cluster.close();
    await server.stop();
  });
  return { address: server.address, cluster, requests, cancelled };
}

/** A readable line per event: "added a 1" (name and data.v), "synced". */
function describeEvent(e: WatchEvent<KubeResource & { data?: Record<string, string> }>): string {
  return e.type === "synced" ? "synced" : `${e.type} ${e.object.metadata.name}${e.object.data?.["v"] ? ` ${e.object.data["v"]}` : ""}`;
}

/** The first n events of a watch, then breaks out of it. */
async function take(events: AsyncIterable<WatchEvent<KubeResource & { data?: Record<string, string> }>>, n: number): Promise<string[]> {
  const out: string[] = [];
  for await (const e of events) {
    out.push(describeEvent(e));
    if (out.length === n) {
      break;
    }
  }
  return out;
}

describe("ClusterClient.watch", () => {
  test("yields the initial list, synced, then the changes, with the request's selection; bookmarks are not yielded", async (t) => {
    const host = await watchHost(t, [
      (call) => {
        call.write(event(WatchEventType.ADDED, "a", "5", { v: "1" }));
        call.write(event(WatchEventType.ADDED, "b", "6"));
        call.write(done("10"));
        call.write(bookmark("11"));
        call.write(event(WatchEventType.MODIFIED, "a", "12", { v: "2" }));
        call.write(event(WatchEventType.ADDED, "c", "13"));
        call.write(event(WatchEventType.DELETED, "b", "14"));
      },
    ]);
    const events = host.cluster.watch(configMaps, { namespace: "shop", labelSelector: "app=web", fieldSelector: "metadata.name!=x" });
    assert.deepEqual(await take(events, 6), ["added a 1", "added b", "synced", "modified a 2", "added c", "deleted b"]);
    const [req] = host.requests;
    assert.deepEqual(
      [req?.kind?.group, req?.kind?.version, req?.kind?.kind, req?.namespace, req?.labelSelector, req?.fieldSelector, req?.resourceVersion],
      ["", "v1", "ConfigMap", "shop", "app=web", "metadata.name!=x", ""],
    );
  });

  test("the events are typed: an object for added, modified and deleted, none for synced", async (t) => {
    const host = await watchHost(t, [(call) => (call.write(event(WatchEventType.ADDED, "a", "5", { v: "1" })), call.write(done("6")))]);
    for await (const e of host.cluster.watch<KubeResource & { data: { v: string } }>(configMaps)) {
      if (e.type === "synced") {
        break;
      }
      assert.equal(e.object.data.v, "1");
      assert.equal(e.object.metadata.resourceVersion, "5");
    }
  });

  test("if the host ends the stream (UNAVAILABLE), then the watch resumes from the last version it saw, a bookmark's too", async (t) => {
    const host = await watchHost(t, [
      (call) => {
        call.write(event(WatchEventType.ADDED, "a", "5"));
        call.write(done("10"));
        call.write(event(WatchEventType.MODIFIED, "a", "12", { v: "2" }));
        fail(call, status.UNAVAILABLE, "the host is shutting down");
      },
      (call) => {
        call.write(event(WatchEventType.MODIFIED, "a", "14", { v: "3" }));
        call.write(bookmark("20"));
        fail(call, status.RESOURCE_EXHAUSTED, "the watch fell behind and was cut off");
      },
      (call) => call.write(event(WatchEventType.DELETED, "a", "21")),
    ]);
    assert.deepEqual(await take(host.cluster.watch(configMaps), 5), ["added a", "synced", "modified a 2", "modified a 3", "deleted a"]);
    assert.deepEqual(
      host.requests.map((r) => r.resourceVersion),
      ["", "12", "20"],
    );
  });

  test("if the version expired (FAILED_PRECONDITION), then it lists again and reports the objects that went as deleted", async (t) => {
    const host = await watchHost(t, [
      (call) => {
        call.write(event(WatchEventType.ADDED, "a", "5", { v: "1" }));
        call.write(event(WatchEventType.ADDED, "b", "6"));
        call.write(done("10"));
        fail(call, status.UNAVAILABLE, "the host is shutting down");
      },
      (call) => fail(call, status.FAILED_PRECONDITION, "resource version 10 of ConfigMap is too old: expired, the host remembers changes after 30 only; relist"),
      (call) => {
        call.write(event(WatchEventType.ADDED, "a", "25", { v: "2" }));
        call.write(event(WatchEventType.ADDED, "c", "26"));
        call.write(done("30"));
        call.write(event(WatchEventType.ADDED, "d", "31"));
      },
    ]);
    const got: Array<WatchEvent> = [];
    for await (const e of host.cluster.watch(configMaps)) {
      got.push(e);
      if (got.length === 8) {
        break;
      }
    }
    assert.deepEqual(got.map(describeEvent), ["added a 1", "added b", "synced", "modified a 2", "added c", "deleted b", "synced", "added d"]);
    const deleted = got[5];
    assert.ok(deleted?.type === "deleted");
    assert.deepEqual(deleted.object, { ...configMaps, metadata: { namespace: "shop", name: "b" } }, "the gone object names its kind and key");
    assert.deepEqual(
      host.requests.map((r) => r.resourceVersion),
      ["", "10", ""],
    );
  });

  test("if the stream breaks during the initial list, then it lists again rather than resume from an object's version", async (t) => {
    const host = await watchHost(t, [
      (call) => {
        call.write(event(WatchEventType.ADDED, "a", "7"));
        fail(call, status.UNAVAILABLE, "the host is shutting down");
      },
      (call) => {
        call.write(event(WatchEventType.ADDED, "a", "7"));
        call.write(event(WatchEventType.ADDED, "b", "3"));
        call.write(done("10"));
      },
    ]);
    assert.deepEqual(await take(host.cluster.watch(configMaps), 4), ["added a", "modified a", "added b", "synced"]);
    assert.deepEqual(
      host.requests.map((r) => r.resourceVersion),
      ["", ""],
    );
  });

  const refusals: Record<string, [number, Code, RegExp]> = {
    "if the host does not cache the kind (FAILED_PRECONDITION on a list), then the loop throws a ClusterError": [
      status.FAILED_PRECONDITION,
      Code.FailedPrecondition,
      /watches only the kinds it caches/,
    ],
    "if the host refuses the selector (INVALID_ARGUMENT), then the loop throws a ClusterError": [status.INVALID_ARGUMENT, Code.InvalidArgument, /field selector/],
  };
  for (const [name, [grpcCode, code, message]] of Object.entries(refusals)) {
    test(name, async (t) => {
      const host = await watchHost(t, [
        (call) =>
          fail(call, grpcCode, "the host does not cache Secret in every namespace, and watches only the kinds it caches: field selector spec.x is not supported"),
      ]);
      await assert.rejects(take(host.cluster.watch({ apiVersion: "v1", kind: "Secret" }), 1), (err: unknown) => {
        assert.ok(err instanceof ClusterError, String(err));
        assert.equal(err.code, code);
        assert.match(err.message, message);
        assert.match(err.message, /watching Secret/);
        return true;
      });
      assert.equal(host.requests.length, 1, "not retried");
    });
  }

  test("breaking out of the loop cancels the stream", async (t) => {
    const host = await watchHost(t, [(call) => (call.write(event(WatchEventType.ADDED, "a", "5")), call.write(done("6")))]);
    assert.deepEqual(await take(host.cluster.watch(configMaps), 2), ["added a", "synced"]);
    await host.cancelled[0]; // the host sees the stream cancelled
  });

  test("aborting the signal ends the loop without an error and cancels the stream", async (t) => {
    const host = await watchHost(t, [(call) => (call.write(event(WatchEventType.ADDED, "a", "5")), call.write(done("6")))]);
    const abort = new AbortController();
    const got: string[] = [];
    for await (const e of host.cluster.watch(configMaps, { signal: abort.signal })) {
      got.push(describeEvent(e));
      if (e.type === "synced") {
        // The loop waits for the next event when the signal aborts.
        setImmediate(() => abort.abort());
      }
    }
    assert.deepEqual(got, ["added a", "synced"]);
    await host.cancelled[0];
    assert.equal(host.requests.length, 1);
  });

  test("closing the client ends its watches: the loop ends without an error", async (t) => {
    const host = await watchHost(t, [(call) => call.write(done("6"))]);
    const client = connectCluster(host.address);
    const got: string[] = [];
    for await (const e of client.withSignal(new AbortController().signal).watch(configMaps)) {
      got.push(describeEvent(e));
      client.close();
    }
    assert.deepEqual(got, ["synced"]);
    await host.cancelled[0];
  });

  test("a client made for a call (withSignal) ends its watches with the call's signal", async (t) => {
    const host = await watchHost(t, [(call) => call.write(done("6"))]);
    const abort = new AbortController();
    const got: string[] = [];
    for await (const e of host.cluster.withSignal(abort.signal).watch(configMaps)) {
      got.push(describeEvent(e));
      abort.abort();
    }
    assert.deepEqual(got, ["synced"]);
    await host.cancelled[0];
  });
});

describe("Sidecar.watch", () => {
  test("waits for the host to announce its Cluster service, then watches there", async (t) => {
    const saved = process.env[CLUSTER_ADDRESS_ENV];
    delete process.env[CLUSTER_ADDRESS_ENV];
    t.after(() => (saved === undefined ? undefined : (process.env[CLUSTER_ADDRESS_ENV] = saved)));
    const host = await watchHost(t, [(call) => (call.write(event(WatchEventType.ADDED, "a", "5")), call.write(done("6")))]);
    const sidecar = new Sidecar({ name: "s", logger: discardLogger });
    const events = take(sidecar.watch(configMaps, { namespace: "shop" }), 2);
    sidecar.service.describe({ $typeName: "polyop.v1alpha1.DescribeRequest", protocolVersion: ProtocolVersion.V1ALPHA1, hostVersion: "", clusterAddress: host.address });
    t.after(() => (sidecar.cluster as ClusterClient).close());
    assert.deepEqual(await events, ["added a", "synced"]);
    assert.equal(host.requests[0]?.namespace, "shop");

    const abort = new AbortController();
    const waiting = take(new Sidecar({ name: "t", logger: discardLogger }).watch(configMaps, { signal: abort.signal }), 1);
    abort.abort();
    assert.deepEqual(await waiting, [], "aborted while waiting for the address, it ends");
  });

  test("a watch waiting for the address ends when the sidecar stops serving", async (t) => {
    const saved = process.env[CLUSTER_ADDRESS_ENV];
    delete process.env[CLUSTER_ADDRESS_ENV];
    t.after(() => (saved === undefined ? undefined : (process.env[CLUSTER_ADDRESS_ENV] = saved)));
    const dir = await mkdtemp(join(tmpdir(), "po-"));
    t.after(() => rm(dir, { recursive: true, force: true }));
    const sidecar = new Sidecar({ name: "s", logger: discardLogger }).reconciler({ for: configMaps }, () => {});
    const waiting = take(sidecar.watch(configMaps), 1);
    const stop = new AbortController();
    const serving = sidecar.serve({ address: `unix://${join(dir, "sidecar.sock")}`, signal: stop.signal });
    stop.abort();
    await serving;
    assert.deepEqual(await waiting, []);
  });
});
