// The sidecar served on a real unix socket (and TCP), called by
// @grpc/grpc-js's client: what the host's grpc-go client does, from an
// implementation independent of the server's.
import assert from "node:assert/strict";
import { mkdtemp, rm, stat } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, test, type TestContext } from "node:test";

import { Code, ConnectError } from "@connectrpc/connect";

import {
  Health,
  HealthCheckRequestSchema,
  HealthCheckResponseSchema,
  HealthCheckResponse_ServingStatus as ServingStatus,
  HealthListRequestSchema,
  HealthListResponseSchema,
} from "./gen/grpc/health/v1/health_pb.js";
import { DescribeRequestSchema, DescribeResponseSchema, ProtocolVersion } from "./gen/polyop/v1alpha1/describe_pb.js";
import { ReconcileRequestSchema, ReconcileResponseSchema } from "./gen/polyop/v1alpha1/reconcile_pb.js";
import { SidecarService } from "./gen/polyop/v1alpha1/sidecar_pb.js";
import { GrpcClient, status, type ServiceError } from "./grpcjs.testutil.js";
import { discardLogger } from "./log.js";
import type { KubeObject } from "./objects.js";
import { Sidecar } from "./sidecar.js";

type Widget = KubeObject<{ size: number; sleepMs?: number }, { seen?: number }>;
const widgets = { apiVersion: "example.com/v1", kind: "Widget" };

/** A sidecar whose reconciler calls onCall as it starts, then sleeps spec.sleepMs. */
function newSidecar(onCall: () => void = () => {}) {
  return new Sidecar({ name: "widget-operator", logger: discardLogger }).reconciler<Widget>(
    { for: widgets },
    async (w, ctx) => {
      onCall();
      if (w.spec.sleepMs) {
        await new Promise((resolve) => setTimeout(resolve, w.spec.sleepMs));
      }
      w.status = { seen: w.spec.size };
      ctx.event("Normal", "Seen", String(w.spec.size));
    },
  );
}

async function socketAddress(t: TestContext): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), "po-"));
  t.after(() => rm(dir, { recursive: true, force: true }));
  return `unix://${join(dir, "sidecar.sock")}`;
}

function reconcileRequest(size: number, sleepMs = 0) {
  const obj: Widget = { ...widgets, metadata: { namespace: "default", name: "w" }, spec: { size, sleepMs } };
  return {
    controller: "widget",
    kind: { group: "example.com", version: "v1", kind: "Widget" },
    key: { namespace: "default", name: "w" },
    object: new TextEncoder().encode(JSON.stringify(obj)),
  };
}

describe("serving on a unix socket", () => {
  test("makes the socket readable and writable by its owner and group only", async (t) => {
    const address = await socketAddress(t);
    const umask = process.umask(0); // whatever the umask, the socket is 0660
    let server;
    try {
      server = await newSidecar().start({ address });
    } finally {
      process.umask(umask);
    }
    t.after(() => server.stop());
    assert.equal((await stat(address.slice("unix://".length))).mode & 0o777, 0o660);
  });

  test("serves a relative socket at its absolute path, and says so", async (t) => {
    const address = await socketAddress(t);
    const dir = address.slice("unix://".length, -"/sidecar.sock".length);
    const cwd = process.cwd();
    process.chdir(dir);
    let server;
    try {
      server = await newSidecar().start({ address: "unix:run/sidecar.sock" });
    } finally {
      process.chdir(cwd);
    }
    t.after(() => server.stop());
    assert.equal(server.address, `unix://${join(dir, "run", "sidecar.sock")}`);
    assert.ok((await stat(join(dir, "run", "sidecar.sock"))).isSocket());
  });

  test("answers health checks, Describe and Reconcile", async (t) => {
    const address = await socketAddress(t);
    const server = await newSidecar().start({ address });
    t.after(() => server.stop());
    const client = new GrpcClient(address);
    t.after(() => client.close());

    for (const service of ["", "polyop.v1alpha1.SidecarService"]) {
      const health = await client.unary(Health, "Check", HealthCheckRequestSchema, HealthCheckResponseSchema, { service });
      assert.equal(health.status, ServingStatus.SERVING, `service ${JSON.stringify(service)}`);
    }
    await assert.rejects(
      client.unary(Health, "Check", HealthCheckRequestSchema, HealthCheckResponseSchema, { service: "unknown" }),
      (err: ServiceError) => err.code === status.NOT_FOUND,
    );
    const list = await client.unary(Health, "List", HealthListRequestSchema, HealthListResponseSchema, {});
    assert.deepEqual(Object.keys(list.statuses).sort(), ["", "polyop.v1alpha1.SidecarService"]);

    const description = await client.unary(SidecarService, "Describe", DescribeRequestSchema, DescribeResponseSchema, {
      protocolVersion: ProtocolVersion.V1ALPHA1,
    });
    assert.equal(description.name, "widget-operator");
    assert.deepEqual(description.controllers.map((c) => c.name), ["widget"]);

    const resp = await client.unary(SidecarService, "Reconcile", ReconcileRequestSchema, ReconcileResponseSchema, reconcileRequest(7));
    assert.deepEqual(JSON.parse(new TextDecoder().decode(resp.status)), { seen: 7 });
    assert.deepEqual(resp.events.map((e) => e.message), ["7"]);

    await assert.rejects(
      client.unary(SidecarService, "Reconcile", ReconcileRequestSchema, ReconcileResponseSchema, { ...reconcileRequest(1), controller: "nope" }),
      (err: ServiceError) => err.code === status.NOT_FOUND && /no controller named "nope"/.test(err.details),
    );
    await assert.rejects(
      client.unary(SidecarService, "Finalize", ReconcileRequestSchema, ReconcileResponseSchema, reconcileRequest(1)),
      (err: ServiceError) => err.code === status.UNIMPLEMENTED,
      "a controller without a finalizer",
    );
  });

  test("serves calls concurrently", async (t) => {
    const address = await socketAddress(t);
    const server = await newSidecar().start({ address });
    t.after(() => server.stop());
    const client = new GrpcClient(address);
    t.after(() => client.close());
    const start = Date.now();
    const calls = Array.from({ length: 10 }, (_, i) =>
      client.unary(SidecarService, "Reconcile", ReconcileRequestSchema, ReconcileResponseSchema, reconcileRequest(i, 300)),
    );
    const resps = await Promise.all(calls);
    assert.deepEqual(resps.map((r) => JSON.parse(new TextDecoder().decode(r.status)).seen), [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
    assert.ok(Date.now() - start < 2000, `10 calls of 300 ms took ${Date.now() - start} ms: not concurrent`);
  });

  test("if a call has answered, then its signal stays unaborted once its stream closes", async (t) => {
    // grpc-js reports every call as cancelled once its stream closes; a call
    // that answered must not see that as the host giving up (nor pay for it).
    const address = await socketAddress(t);
    const signals: AbortSignal[] = [];
    const sidecar = new Sidecar({ name: "widget-operator", logger: discardLogger }).reconciler<Widget>({ for: widgets }, (w, ctx) => {
      signals.push(ctx.signal);
      w.status = { seen: signals.filter((s) => s.aborted).length };
    });
    const server = await sidecar.start({ address });
    t.after(() => server.stop());
    const client = new GrpcClient(address);
    t.after(() => client.close());
    await client.unary(SidecarService, "Reconcile", ReconcileRequestSchema, ReconcileResponseSchema, reconcileRequest(1));
    // The first call's stream closed before the second call was served on the same connection.
    const second = await client.unary(SidecarService, "Reconcile", ReconcileRequestSchema, ReconcileResponseSchema, reconcileRequest(2));
    assert.deepEqual(JSON.parse(new TextDecoder().decode(second.status)), { seen: 0 }, "the first call's signal, seen from the second call");
    assert.equal(signals[0]!.aborted, false);
  });

  test("if the host's deadline passes, then the call fails with DEADLINE_EXCEEDED", async (t) => {
    const address = await socketAddress(t);
    const server = await newSidecar().start({ address });
    t.after(() => server.stop());
    const client = new GrpcClient(address);
    t.after(() => client.close());
    await assert.rejects(
      client.unary(SidecarService, "Reconcile", ReconcileRequestSchema, ReconcileResponseSchema, reconcileRequest(1, 1000), 200),
      (err: ServiceError) => err.code === status.DEADLINE_EXCEEDED,
    );
  });

  test("if the host's deadline passes, then the handler's signal aborts", async (t) => {
    const address = await socketAddress(t);
    let markAborted: (reason: unknown) => void = () => {};
    const aborted = new Promise<unknown>((resolve) => (markAborted = resolve));
    const sidecar = new Sidecar({ name: "widget-operator", logger: discardLogger }).reconciler<Widget>({ for: widgets }, async (_, ctx) => {
      await new Promise((resolve) => ctx.signal.addEventListener("abort", resolve, { once: true }));
      markAborted(ctx.signal.reason);
    });
    const server = await sidecar.start({ address });
    t.after(() => server.stop());
    const client = new GrpcClient(address);
    t.after(() => client.close());
    await assert.rejects(
      client.unary(SidecarService, "Reconcile", ReconcileRequestSchema, ReconcileResponseSchema, reconcileRequest(1), 200),
      (err: ServiceError) => err.code === status.DEADLINE_EXCEEDED,
    );
    const reason = await aborted;
    // The sidecar's own timer, or the host's cancellation when it comes first.
    assert.ok(reason instanceof ConnectError && [Code.DeadlineExceeded, Code.Canceled].includes(reason.code), String(reason));
  });

  test("stops gracefully: health turns NOT_SERVING, calls in flight finish, the socket goes", async (t) => {
    const address = await socketAddress(t);
    let markCalled = () => {};
    const called = new Promise<void>((resolve) => (markCalled = resolve));
    const server = await newSidecar(markCalled).start({ address });
    const client = new GrpcClient(address);
    t.after(() => client.close());

    const watch = client.serverStream(Health, "Watch", HealthCheckRequestSchema, HealthCheckResponseSchema, { service: "" });
    const seen: ServingStatus[] = [];
    const watchEnded = new Promise<ServiceError | undefined>((resolve) => {
      watch.on("data", (m: { status: ServingStatus }) => seen.push(m.status));
      watch.on("error", (err: ServiceError) => resolve(err));
      watch.on("end", () => resolve(undefined));
    });
    const inFlight = client.unary(SidecarService, "Reconcile", ReconcileRequestSchema, ReconcileResponseSchema, reconcileRequest(5, 500));
    await called; // the call is in flight
    await server.stop();

    const resp = await inFlight;
    assert.deepEqual(JSON.parse(new TextDecoder().decode(resp.status)), { seen: 5 }, "the call in flight finished");
    const err = await watchEnded;
    assert.equal(err?.code, status.UNAVAILABLE);
    assert.deepEqual(seen, [ServingStatus.SERVING, ServingStatus.NOT_SERVING]);
    await assert.rejects(stat(address.slice("unix://".length)), { code: "ENOENT" });
  });

  test("if calls outlast the graceful shutdown timeout, then their connections close", async (t) => {
    const address = await socketAddress(t);
    let markCalled = () => {};
    const called = new Promise<void>((resolve) => (markCalled = resolve));
    const server = await newSidecar(markCalled).start({ address, gracefulShutdownTimeoutMs: 200 });
    const client = new GrpcClient(address);
    t.after(() => client.close());
    const slow = client.unary(SidecarService, "Reconcile", ReconcileRequestSchema, ReconcileResponseSchema, reconcileRequest(1, 3000), 10_000);
    slow.catch(() => {});
    await called; // the call is in flight
    const start = Date.now();
    await server.stop();
    assert.ok(Date.now() - start < 2000, `stopping took ${Date.now() - start} ms`);
    await assert.rejects(slow, (err: ServiceError) => err.code === status.UNAVAILABLE || err.code === status.INTERNAL || err.code === status.CANCELLED);
  });

  test("serve stops when its signal aborts", async (t) => {
    const address = await socketAddress(t);
    const controller = new AbortController();
    const served = newSidecar().serve({ address, signal: controller.signal });
    const client = new GrpcClient(address);
    t.after(() => client.close());
    let health;
    for (let i = 0; i < 50 && !health; i++) {
      health = await client
        .unary(Health, "Check", HealthCheckRequestSchema, HealthCheckResponseSchema, { service: "" }, 200)
        .catch(() => new Promise((resolve) => setTimeout(() => resolve(undefined), 20)));
    }
    assert.ok(health);
    controller.abort();
    await served;
  });

  test("refuses to serve twice, or with nothing registered, or where another process serves", async (t) => {
    const address = await socketAddress(t);
    const sidecar = newSidecar();
    const server = await sidecar.start({ address });
    t.after(() => server.stop());
    await assert.rejects(sidecar.start({ address }), /already serving/);
    await assert.rejects(newSidecar().start({ address }), /another process is serving/);
    await assert.rejects(new Sidecar({ name: "empty", logger: discardLogger }).start({ address }), /nothing is registered/);
    assert.throws(() => sidecar.reconciler({ for: { apiVersion: "v1", kind: "ConfigMap" } }, () => {}), /before serving/);
  });
});

test("serves on TCP, reporting the port chosen", async (t) => {
  const server = await newSidecar().start({ address: "tcp://127.0.0.1:0" });
  t.after(() => server.stop());
  assert.match(server.address, /^tcp:\/\/127\.0\.0\.1:\d+$/);
  const client = new GrpcClient(server.address.slice("tcp://".length));
  t.after(() => client.close());
  const resp = await client.unary(SidecarService, "Reconcile", ReconcileRequestSchema, ReconcileResponseSchema, reconcileRequest(3));
  assert.deepEqual(JSON.parse(new TextDecoder().decode(resp.status)), { seen: 3 });
});
