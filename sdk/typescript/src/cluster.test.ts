// The Cluster client against a ClusterService served on a real unix socket,
// with errors carrying the API server's status as the host sends them.
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { createSecureServer, createServer } from "node:http2";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, test, type TestContext } from "node:test";

import { Code, ConnectError } from "@connectrpc/connect";
import { connectNodeAdapter } from "@connectrpc/connect-node";

import {
  CLUSTER_TLS_CA_FILE_ENV,
  CLUSTER_TLS_CERT_FILE_ENV,
  CLUSTER_TLS_KEY_FILE_ENV,
  clusterTLSFromEnv,
  connectCluster,
} from "./cluster.js";
import {
  AlreadyExistsError,
  BadRequestError,
  ClusterError,
  clusterError,
  ConflictError,
  ForbiddenError,
  GoneError,
  ignoreNotFound,
  InvalidError,
  NotFoundError,
  ServerError,
  TooManyRequestsError,
  UnauthorizedError,
  type Status,
} from "./errors.js";
import { APIErrorSchema, ClusterService, DeletePropagation, PatchType, ReadSource } from "./gen/polyop/v1alpha1/cluster_pb.js";
import { ProtocolVersion } from "./gen/polyop/v1alpha1/describe_pb.js";
import { EventType } from "./gen/polyop/v1alpha1/reconcile_pb.js";
import { discardLogger } from "./log.js";
import type { KubeResource } from "./objects.js";
import { Sidecar } from "./sidecar.js";
import { Harness } from "./testing.js";

const configMaps = { apiVersion: "v1", kind: "ConfigMap" };
const json = (v: unknown) => new TextEncoder().encode(JSON.stringify(v));
const parse = (b: Uint8Array) => JSON.parse(new TextDecoder().decode(b));

function apiError(status: Status, code: Code): ConnectError {
  return new ConnectError(status.message ?? "", code, undefined, [{ desc: APIErrorSchema, value: { status: json(status) } }]);
}

/** Serves a ClusterService that records each request and answers from a script. */
/**
 * A fake host's Cluster service on a unix socket or, with tls (PEM files of
 * its certificate and key, and the CA its clients' certificates must be signed
 * by), with mutual TLS on a loopback TCP port, as the host serves it with
 * --cluster-tls-*.
 */
async function fakeHost(t: TestContext, tls?: { cert: string; key: string; clientCA: string }) {
  const dir = await mkdtemp(join(tmpdir(), "po-"));
  let address = `unix://${join(dir, "cluster.sock")}`;
  const requests: Array<[string, Record<string, unknown>]> = [];
  const store = new Map<string, KubeResource>([["default/settings", { ...configMaps, metadata: { namespace: "default", name: "settings" } }]]);
  const handler = connectNodeAdapter({
    routes: (router) =>
      router.service(ClusterService, {
        get(req) {
          requests.push(["get", req]);
          if (req.subresource === "scale") {
            return { object: json({ apiVersion: "autoscaling/v1", kind: "Scale", metadata: { name: req.key?.name }, spec: { replicas: 3 } }), source: ReadSource.API_SERVER };
          }
          const obj = store.get(`${req.key?.namespace}/${req.key?.name}`);
          if (!obj) {
            throw apiError({ status: "Failure", reason: "NotFound", code: 404, message: `configmaps "${req.key?.name}" not found` }, Code.NotFound);
          }
          // The cache may leave apiVersion and kind out.
          return { object: json({ metadata: obj.metadata }), source: ReadSource.CACHE };
        },
        list(req) {
          requests.push(["list", req]);
          return { items: [...store.values()].map((o) => json(o)), continueToken: "next", resourceVersion: "42", source: ReadSource.API_SERVER };
        },
        create(req) {
          requests.push(["create", req]);
          if (req.subresource === "eviction") {
            return { object: json({ apiVersion: "v1", kind: "Status", status: "Success", code: 201 }) };
          }
          const obj = parse(req.object) as KubeResource;
          if (store.has(`${obj.metadata.namespace}/${obj.metadata.name}`)) {
            throw apiError({ reason: "AlreadyExists", code: 409, message: `configmaps "${obj.metadata.name}" already exists` }, Code.AlreadyExists);
          }
          if (obj.metadata.name === "forbidden") {
            throw apiError({ reason: "Forbidden", code: 403, message: "configmaps is forbidden" }, Code.PermissionDenied);
          }
          if (obj.metadata.name === "Invalid") {
            throw apiError(
              {
                reason: "Invalid",
                code: 422,
                message: 'ConfigMap "Invalid" is invalid: metadata.name: Invalid value: "Invalid": a lowercase RFC 1123 subdomain',
                details: { causes: [{ reason: "FieldValueInvalid", field: "metadata.name", message: "Invalid value" }] },
              },
              Code.InvalidArgument,
            );
          }
          obj.metadata.uid = "uid-1";
          store.set(`${obj.metadata.namespace}/${obj.metadata.name}`, obj);
          return { object: json(obj) };
        },
        update(req) {
          requests.push(["update", req]);
          throw apiError({ reason: "Conflict", code: 409, message: "the object has been modified" }, Code.Aborted);
        },
        patch(req) {
          requests.push(["patch", req]);
          return { object: json({ ...configMaps, metadata: { name: req.key?.name }, patched: parse(req.patch) }) };
        },
        delete(req) {
          requests.push(["delete", req]);
          throw new ConnectError("the host is shutting down", Code.Unavailable);
        },
        recordEvent(req) {
          requests.push(["recordEvent", req]);
          return {};
        },
        resolveKind(req) {
          requests.push(["resolveKind", req]);
          return { kind: { group: "", version: "v1", kind: "ConfigMap" }, resource: "configmaps", namespaced: true };
        },
      }),
  });
  const server = tls
    ? createSecureServer(
        { cert: readFileSync(tls.cert), key: readFileSync(tls.key), ca: readFileSync(tls.clientCA), requestCert: true, rejectUnauthorized: true },
        handler,
      )
    : createServer(handler);
  if (tls) {
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    address = `tcp://127.0.0.1:${(server.address() as AddressInfo).port}`;
  } else {
    await new Promise<void>((resolve) => server.listen(address.slice("unix://".length), resolve));
  }
  const sessions = new Set<import("node:http2").ServerHttp2Session>();
  server.on("session", (s) => sessions.add(s));
  t.after(async () => {
    for (const s of sessions) {
      s.destroy();
    }
    await new Promise((resolve) => server.close(resolve));
    await rm(dir, { recursive: true, force: true });
  });
  return { address, requests };
}

describe("ClusterClient", () => {
  test("reads, writes and maps every option onto the request", async (t) => {
    const host = await fakeHost(t);
    const cluster = connectCluster(host.address);
    t.after(() => cluster.close());

    const cm = await cluster.get(configMaps, { namespace: "default", name: "settings" }, { uncached: true });
    assert.equal(cm.apiVersion, "v1", "apiVersion is set when the host left it out");
    assert.equal(cm.kind, "ConfigMap");
    assert.equal(cm.metadata.name, "settings");

    const list = await cluster.list(configMaps, { namespace: "default", labelSelector: "a=b", fieldSelector: "metadata.name=x", limit: 5, continue: "tok" });
    assert.deepEqual(
      { items: list.items.length, continue: list.continue, resourceVersion: list.resourceVersion, source: list.source },
      { items: 1, continue: "next", resourceVersion: "42", source: "apiServer" },
    );

    const created = await cluster.create<KubeResource>({ ...configMaps, metadata: { namespace: "default", name: "new" } }, { dryRun: true, fieldManager: "me" });
    assert.equal(created.metadata.uid, "uid-1");
    const patched = await cluster.patch<KubeResource & { patched: unknown }>(configMaps, { namespace: "default", name: "p" }, { data: { a: "1" } }, { type: "merge", subresource: "status" });
    assert.deepEqual(patched.patched, { data: { a: "1" } });
    await cluster.apply({ ...configMaps, metadata: { namespace: "default", name: "a" } }, { force: true, fieldManager: "owner" });
    await cluster.update({ ...configMaps, metadata: { namespace: "default", name: "u" } }, { subresource: "status" }).catch(() => {});
    await cluster.recordEvent({ ...configMaps, metadata: { namespace: "default", name: "settings" } }, { type: "Warning", reason: "Odd", message: "odd" });
    const resolved = await cluster.resolveKind({ apiVersion: "v1", kind: "ConfigMap" });
    assert.deepEqual(resolved, { apiVersion: "v1", kind: "ConfigMap", resource: "configmaps", namespaced: true });
    await cluster.delete(configMaps, { namespace: "default", name: "x" }, { propagation: "Foreground", preconditions: { uid: "u" }, gracePeriodSeconds: 0 }).catch(() => {});

    const seen = Object.fromEntries(host.requests.map(([verb, req]) => [verb, req])) as Record<string, any>;
    assert.equal(seen.get.options.uncached, true);
    assert.deepEqual(
      [seen.list.namespace, seen.list.labelSelector, seen.list.fieldSelector, seen.list.limit, seen.list.continueToken, seen.list.kind.kind, seen.list.options.uncached],
      ["default", "a=b", "metadata.name=x", 5n, "tok", "ConfigMap", false],
    );
    assert.deepEqual(
      [seen.create.kind.version, seen.create.kind.kind, seen.create.key.namespace, seen.create.key.name, seen.create.options.dryRun, seen.create.options.fieldManager],
      ["v1", "ConfigMap", "default", "new", true, "me"],
    );
    assert.deepEqual([seen.update.kind.kind, seen.update.key.namespace, seen.update.key.name, seen.update.subresource], ["ConfigMap", "default", "u", "status"]);
    const apply = host.requests.filter(([v]) => v === "patch").map(([, r]) => r as any);
    assert.deepEqual([apply[0].type, apply[0].subresource, apply[0].options.force], [PatchType.MERGE, "status", false]);
    assert.deepEqual([apply[1].type, apply[1].options.force, apply[1].options.fieldManager, apply[1].key.name], [PatchType.APPLY, true, "owner", "a"]);
    assert.deepEqual([seen.recordEvent.event.type, seen.recordEvent.event.reason, seen.recordEvent.key.name], [EventType.WARNING, "Odd", "settings"]);
    assert.deepEqual(
      [seen.delete.propagation, seen.delete.preconditionUid, seen.delete.gracePeriodSeconds],
      [DeletePropagation.FOREGROUND, "u", 0n],
    );
  });

  test("reads and creates subresources of an object", async (t) => {
    const host = await fakeHost(t);
    const cluster = connectCluster(host.address);
    t.after(() => cluster.close());

    const deployments = { apiVersion: "apps/v1", kind: "Deployment" };
    const scale = await cluster.get<KubeResource & { spec: { replicas: number } }>(deployments, { namespace: "default", name: "web" }, { subresource: "scale" });
    assert.deepEqual([scale.apiVersion, scale.kind, scale.spec.replicas], ["autoscaling/v1", "Scale", 3], "the Scale keeps its own kind");
    const pods = { apiVersion: "v1", kind: "Pod" };
    const answer = await cluster.createSubresource(pods, { namespace: "default", name: "web-0" }, "eviction", { apiVersion: "policy/v1", kind: "Eviction" }, { dryRun: true });
    assert.equal(answer.kind, "Status");

    const [get, create] = host.requests.map(([, req]) => req as any);
    assert.deepEqual([get.subresource, get.kind.kind, get.key.name], ["scale", "Deployment", "web"]);
    assert.deepEqual(
      [create.subresource, create.kind.kind, create.key.namespace, create.key.name, create.options.dryRun, parse(create.object).kind],
      ["eviction", "Pod", "default", "web-0", true, "Eviction"],
    );
  });

  const errors: Record<string, [(c: ReturnType<typeof connectCluster>) => Promise<unknown>, typeof ClusterError, string, Code]> = {
    "a missing object is a NotFoundError": [(c) => c.get(configMaps, { namespace: "default", name: "gone" }), NotFoundError, "NotFound", Code.NotFound],
    "an existing object is an AlreadyExistsError": [
      (c) => c.create({ ...configMaps, metadata: { namespace: "default", name: "settings" } }),
      AlreadyExistsError,
      "AlreadyExists",
      Code.AlreadyExists,
    ],
    "a stale resourceVersion is a ConflictError": [
      (c) => c.update({ ...configMaps, metadata: { namespace: "default", name: "settings", resourceVersion: "1" } }),
      ConflictError,
      "Conflict",
      Code.Aborted,
    ],
    "a refused write is a ForbiddenError": [
      (c) => c.create({ ...configMaps, metadata: { namespace: "default", name: "forbidden" } }),
      ForbiddenError,
      "Forbidden",
      Code.PermissionDenied,
    ],
    "an invalid object is an InvalidError": [
      (c) => c.create({ ...configMaps, metadata: { namespace: "default", name: "Invalid" } }),
      InvalidError,
      "Invalid",
      Code.InvalidArgument,
    ],
    "an error without the API server's status is a plain ClusterError": [
      (c) => c.delete(configMaps, { namespace: "default", name: "x" }),
      ClusterError,
      "",
      Code.Unavailable,
    ],
  };
  for (const [name, [call, Class, reason, code]] of Object.entries(errors)) {
    test(name, async (t) => {
      const host = await fakeHost(t);
      const cluster = connectCluster(host.address);
      t.after(() => cluster.close());
      await assert.rejects(call(cluster), (err: unknown) => {
        assert.ok(err instanceof Class, `${String(err)} is a ${Class.name}`);
        assert.equal(err.constructor, Class);
        assert.equal(err.reason, reason);
        assert.equal(err.code, code);
        return true;
      });
    });
  }

  test("an InvalidError carries the causes, and ignoreNotFound lets absence through", async (t) => {
    const host = await fakeHost(t);
    const cluster = connectCluster(host.address);
    t.after(() => cluster.close());
    const err = await cluster.create({ ...configMaps, metadata: { namespace: "default", name: "Invalid" } }).catch((e: unknown) => e);
    assert.ok(err instanceof InvalidError);
    assert.deepEqual(err.causes, [{ reason: "FieldValueInvalid", field: "metadata.name", message: "Invalid value" }]);
    assert.match(err.message, /is invalid/);
    assert.equal(await cluster.get(configMaps, { namespace: "default", name: "gone" }).catch(ignoreNotFound), undefined);
    await assert.rejects(cluster.update({ ...configMaps, metadata: { name: "x" } }).catch(ignoreNotFound), ConflictError);
  });

  test("if nothing serves at the address, then calls fail with UNAVAILABLE", async () => {
    const cluster = connectCluster("unix:///tmp/po-nothing-here.sock");
    await assert.rejects(cluster.get(configMaps, { name: "x" }), (err: unknown) => err instanceof ClusterError && err.code === Code.Unavailable);
    cluster.close();
  });

  test("a reconcile reaches the address the host sent in Describe through ctx.cluster", async (t) => {
    const host = await fakeHost(t);
    const sidecar = new Sidecar({ name: "s", logger: discardLogger }).reconciler<KubeResource & { status?: { found: boolean } }>(
      { for: configMaps },
      async (obj, ctx) => {
        const settings = await ctx.cluster.get(configMaps, { namespace: "default", name: "settings" }).catch(ignoreNotFound);
        await ctx.cluster.recordEvent(obj, { type: "Normal", reason: "Looked", message: "looked" });
        obj.status = { found: settings !== undefined };
      },
    );
    sidecar.service.describe({ $typeName: "polyop.v1alpha1.DescribeRequest", protocolVersion: ProtocolVersion.V1ALPHA1, hostVersion: "", clusterAddress: host.address });
    t.after(() => (sidecar.cluster as ReturnType<typeof connectCluster>).close());
    const out = await new Harness(sidecar).reconcile({ ...configMaps, metadata: { namespace: "default", name: "x" } });
    assert.equal(out.error, undefined);
    assert.deepEqual(out.status, { found: true });
    assert.deepEqual(host.requests.map(([v]) => v), ["get", "recordEvent"]);
  });
});

describe("clusterError", () => {
  const cases: Record<string, [Status, typeof ClusterError]> = {
    "reason NotFound is a NotFoundError": [{ reason: "NotFound", code: 404 }, NotFoundError],
    "reason Unauthorized is an UnauthorizedError": [{ reason: "Unauthorized", code: 401 }, UnauthorizedError],
    "reason TooManyRequests is a TooManyRequestsError": [{ reason: "TooManyRequests", code: 429 }, TooManyRequestsError],
    "reason Gone is a GoneError": [{ reason: "Gone", code: 410 }, GoneError],
    "reason Expired, a continue token too old, is a GoneError": [{ reason: "Expired", code: 410 }, GoneError],
    "reason BadRequest is a BadRequestError": [{ reason: "BadRequest", code: 400 }, BadRequestError],
    "reason InternalError is a ServerError": [{ reason: "InternalError", code: 500 }, ServerError],
    "reason ServiceUnavailable is a ServerError": [{ reason: "ServiceUnavailable", code: 503 }, ServerError],
    "reason ServerTimeout is a ServerError": [{ reason: "ServerTimeout", code: 500 }, ServerError],
    "reason Timeout is a ServerError": [{ reason: "Timeout", code: 504 }, ServerError],
    "without a reason, HTTP 410 is a GoneError": [{ code: 410 }, GoneError],
    "without a reason, HTTP 400 is a BadRequestError": [{ code: 400 }, BadRequestError],
    "without a reason, any HTTP 5xx is a ServerError": [{ code: 502 }, ServerError],
    "without a reason, another HTTP code is a plain ClusterError": [{ code: 418 }, ClusterError],
  };
  for (const [name, [status, Class]] of Object.entries(cases)) {
    test(name, () => {
      const err = clusterError(apiError({ message: "m", ...status }, Code.Unknown), "getting ConfigMap default/x");
      assert.equal(err.constructor, Class, `${err.name} is a ${Class.name}`);
      assert.ok(err instanceof ClusterError);
      assert.equal(err.name, Class.name);
      assert.equal(err.status?.code, status.code);
    });
  }
});

/**
 * A CA, a server certificate it signed for 127.0.0.1 and localhost, and a
 * client certificate it signed, made with openssl; undefined where openssl
 * cannot make them.
 */
async function mutualTLS(t: TestContext): Promise<Record<"ca" | "serverCert" | "serverKey" | "clientCert" | "clientKey", string> | undefined> {
  const dir = await mkdtemp(join(tmpdir(), "po-tls-"));
  t.after(() => rm(dir, { recursive: true, force: true }));
  const f = {
    ca: join(dir, "ca.crt"),
    caKey: join(dir, "ca.key"),
    serverCert: join(dir, "server.crt"),
    serverKey: join(dir, "server.key"),
    clientCert: join(dir, "client.crt"),
    clientKey: join(dir, "client.key"),
  };
  const req = (key: string, cert: string, ...args: string[]) =>
    execFileSync("openssl", ["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", cert, "-days", "1", ...args], { stdio: "pipe" });
  try {
    req(f.caKey, f.ca, "-subj", "/CN=polyop test CA");
    req(f.serverKey, f.serverCert, "-CA", f.ca, "-CAkey", f.caKey, "-subj", "/CN=localhost",
      "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1", "-addext", "extendedKeyUsage=serverAuth");
    req(f.clientKey, f.clientCert, "-CA", f.ca, "-CAkey", f.caKey, "-subj", "/CN=polyop sidecar", "-addext", "extendedKeyUsage=clientAuth");
  } catch (err) {
    t.skip(`openssl cannot make certificates here: ${String(err)}`);
    return undefined;
  }
  return f;
}

describe("ClusterClient with mutual TLS", () => {
  test("dials with the CA and client certificate the environment names, and fails without them", async (t) => {
    const f = await mutualTLS(t);
    if (!f) {
      return;
    }
    const host = await fakeHost(t, { cert: f.serverCert, key: f.serverKey, clientCA: f.ca });
    const get = async (tls: ReturnType<typeof clusterTLSFromEnv>) => {
      const client = connectCluster(host.address, { tls, timeoutMs: 10_000 });
      try {
        return await client.get<KubeResource>(configMaps, { namespace: "default", name: "settings" });
      } finally {
        client.close();
      }
    };

    const env = { [CLUSTER_TLS_CA_FILE_ENV]: f.ca, [CLUSTER_TLS_CERT_FILE_ENV]: f.clientCert, [CLUSTER_TLS_KEY_FILE_ENV]: f.clientKey };
    const got = await get(clusterTLSFromEnv(env));
    assert.equal(got.metadata.name, "settings");

    await assert.rejects(get(clusterTLSFromEnv({ [CLUSTER_TLS_CA_FILE_ENV]: f.ca })), "without a client certificate");
    await assert.rejects(get(undefined), "in plain text");
    assert.equal(clusterTLSFromEnv({}), undefined);
    assert.throws(() => clusterTLSFromEnv({ [CLUSTER_TLS_CERT_FILE_ENV]: f.clientCert }), new RegExp(CLUSTER_TLS_CA_FILE_ENV));
  });
});
