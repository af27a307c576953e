// ReconcileStream served on a real unix socket, called by @grpc/grpc-js's
// client as the host's grpc-go client calls it: each call on the stream is
// answered as the same unary call is.
import assert from "node:assert/strict";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, test, type TestContext } from "node:test";

import type { MessageInitShape } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";

import { TerminalError } from "./errors.js";
import { DescribeRequestSchema, DescribeResponseSchema, ProtocolVersion } from "./gen/polyop/v1alpha1/describe_pb.js";
import {
  FinalizeRequestSchema,
  FinalizeResponseSchema,
  ReconcileRequestSchema,
  ReconcileResponseSchema,
  ReconcileStreamRequestSchema,
  ReconcileStreamResponseSchema,
  type ReconcileStreamResponse,
} from "./gen/polyop/v1alpha1/reconcile_pb.js";
import { SidecarService } from "./gen/polyop/v1alpha1/sidecar_pb.js";
import { GrpcClient, status, type ServiceError } from "./grpcjs.testutil.js";
import { discardLogger } from "./log.js";
import type { KubeObject } from "./objects.js";
import type { ServeOptions } from "./serve.js";
import { Sidecar, type SidecarOptions } from "./sidecar.js";

type Widget = KubeObject<
  { size: number; fail?: "terminal" | "transient"; waitForAbort?: boolean; lingerMs?: number },
  { seen?: number }
>;
const widgets = { apiVersion: "example.com/v1", kind: "Widget" };
const json = (v: unknown) => new TextEncoder().encode(JSON.stringify(v));

type StreamRequest = MessageInitShape<typeof ReconcileStreamRequestSchema>;
type ReconcileInit = CallFields;

/** What the reconciler of newSidecar saw: the calls it ran, at most how many at once, and the signals they aborted with. */
interface Seen {
  calls: number;
  running: number;
  maxRunning: number;
  aborted: unknown[];
  /** Resolves once a call is waiting for its signal to abort. */
  waiting: Promise<void>;
  /** What happened, in order: "returned" when a lingering call returns, and what the test adds. */
  order: string[];
  /** Ends the linger of a call that waits for it. */
  answered: () => void;
}

/**
 * A sidecar with a Widget controller with a finalizer: the reconciler sets
 * status.seen to spec.size, records an event, and fails as spec.fail says;
 * with spec.waitForAbort it waits for its signal to abort, then returns, after
 * spec.lingerMs or seen.answered() if it is set.
 */
function newSidecar(options: Partial<SidecarOptions> = {}) {
  let markWaiting = () => {};
  let markAnswered = () => {};
  const answered = new Promise<void>((resolve) => (markAnswered = resolve));
  const seen: Seen = {
    calls: 0,
    running: 0,
    maxRunning: 0,
    aborted: [],
    waiting: new Promise<void>((resolve) => (markWaiting = resolve)),
    order: [],
    answered: () => markAnswered(),
  };
  const sidecar = new Sidecar({ name: "widget-operator", logger: discardLogger, ...options }).reconciler<Widget>(
    { for: widgets, finalizer: "example.com/cleanup" },
    async (w, ctx) => {
      seen.calls++;
      seen.maxRunning = Math.max(seen.maxRunning, ++seen.running);
      try {
        if (w.spec.waitForAbort) {
          await new Promise<void>((resolve) => {
            ctx.signal.addEventListener("abort", () => resolve(), { once: true });
            markWaiting();
          });
          seen.aborted.push(ctx.signal.reason);
          if (w.spec.lingerMs) {
            let timer: NodeJS.Timeout | undefined;
            await Promise.race([answered, new Promise((resolve) => (timer = setTimeout(resolve, w.spec.lingerMs)))]);
            clearTimeout(timer);
            seen.order.push("returned");
          }
          return;
        }
        await new Promise((resolve) => setImmediate(resolve)); // answer from a later turn, as real reconcilers do
        w.status = { seen: w.spec.size };
        ctx.event("Normal", "Seen", String(w.spec.size));
        if (w.spec.fail === "terminal") {
          throw new TerminalError("the size is wrong");
        }
        if (w.spec.fail === "transient") {
          throw new Error("the database is down");
        }
        return { requeueAfter: 60_000 };
      } finally {
        seen.running--;
      }
    },
  );
  sidecar.finalizer<Widget>(widgets, (w, ctx) => {
    ctx.event("Normal", "CleanedUp", String(w.spec.size));
    return { requeueAfter: w.spec.size * 1000 };
  });
  return { sidecar, seen };
}

/** The fields a Reconcile and a Finalize request share. */
interface CallFields {
  controller: string;
  kind: { group: string; version: string; kind: string };
  key: { namespace?: string; name?: string };
  object: Uint8Array;
  retries: number;
}

/** A request for the Widget default/w with spec, a Reconcile's or a Finalize's. */
function reconcileRequest(spec: Widget["spec"], overrides: Partial<CallFields> = {}): CallFields {
  return {
    controller: "widget",
    kind: { group: "example.com", version: "v1", kind: "Widget" },
    key: { namespace: "default", name: "w" },
    object: json({ ...widgets, metadata: { namespace: "default", name: "w" }, spec }),
    retries: 1,
    ...overrides,
  };
}

/** A ReconcileStream as the host holds it: send a request, read the answers in order, see how it ends. */
class HostStream {
  private readonly answers: ReconcileStreamResponse[] = [];
  private readonly waiters: Array<(r: ReconcileStreamResponse) => void> = [];
  /** Resolves with the status the stream ended with: null for OK. */
  readonly ended: Promise<ServiceError | null>;

  constructor(readonly call: ReturnType<GrpcClient["bidiStream"]>) {
    call.on("data", (r: ReconcileStreamResponse) => {
      const waiter = this.waiters.shift();
      if (waiter) {
        waiter(r);
      } else {
        this.answers.push(r);
      }
    });
    this.ended = new Promise((resolve) => {
      call.on("error", (err: ServiceError) => resolve(err));
      call.on("status", (s: { code: (typeof status)[keyof typeof status] }) => s.code === status.OK && resolve(null));
    });
  }

  send(req: StreamRequest): void {
    this.call.write(req);
  }

  /** The next answer. */
  next(): Promise<ReconcileStreamResponse> {
    const answer = this.answers.shift();
    return answer ? Promise.resolve(answer) : new Promise((resolve) => this.waiters.push(resolve));
  }

  /** Sends req and reads its answer, checking it carries req's id. */
  async call1(req: StreamRequest): Promise<ReconcileStreamResponse["result"]> {
    this.send(req);
    const answer = await this.next();
    assert.equal(answer.id, req.id);
    return answer.result;
  }
}

async function setUp(t: TestContext, options: ServeOptions = {}, sidecarOptions: Partial<SidecarOptions> = {}) {
  const dir = await mkdtemp(join(tmpdir(), "po-"));
  t.after(() => rm(dir, { recursive: true, force: true }));
  const address = `unix://${join(dir, "sidecar.sock")}`;
  const { sidecar, seen } = newSidecar(sidecarOptions);
  const server = await sidecar.start({ ...options, address });
  t.after(() => server.stop());
  const client = new GrpcClient(address);
  t.after(() => client.close());
  const open = () => {
    const stream = new HostStream(client.bidiStream(SidecarService, "ReconcileStream", ReconcileStreamRequestSchema, ReconcileStreamResponseSchema));
    t.after(() => stream.call.cancel());
    return stream;
  };
  const unaryReconcile = (req: ReconcileInit) => client.unary(SidecarService, "Reconcile", ReconcileRequestSchema, ReconcileResponseSchema, req);
  const unaryFinalize = (req: MessageInitShape<typeof FinalizeRequestSchema>) =>
    client.unary(SidecarService, "Finalize", FinalizeRequestSchema, FinalizeResponseSchema, req);
  return { client, open, seen, unaryReconcile, unaryFinalize };
}

/** The unary call's error as a CallStatus's code and message. */
async function unaryStatus(call: Promise<unknown>): Promise<{ code: number; message: string }> {
  const err = await call.then(
    () => assert.fail("the unary call succeeded"),
    (e: ServiceError) => e,
  );
  return { code: err.code, message: err.details };
}

describe("ReconcileStream", () => {
  test("Describe says the sidecar serves it", async (t) => {
    const { client } = await setUp(t);
    const d = await client.unary(SidecarService, "Describe", DescribeRequestSchema, DescribeResponseSchema, { protocolVersion: ProtocolVersion.V1ALPHA1 });
    assert.equal(d.reconcileStream, true);
  });

  test("if the sidecar is told not to serve it, then Describe says so and opening it fails with UNIMPLEMENTED", async (t) => {
    const { client, open } = await setUp(t, { reconcileStream: false });
    const d = await client.unary(SidecarService, "Describe", DescribeRequestSchema, DescribeResponseSchema, { protocolVersion: ProtocolVersion.V1ALPHA1 });
    assert.equal(d.reconcileStream, false);
    const stream = open();
    stream.send({ id: 1n, call: { case: "reconcile", value: reconcileRequest({ size: 1 }) } });
    assert.equal((await stream.ended)?.code, status.UNIMPLEMENTED);
  });

  test("answers each call with its id and what the unary call answers, one after the other on one stream", async (t) => {
    const { open, unaryReconcile, unaryFinalize } = await setUp(t);
    const stream = open();
    for (const [id, size] of [[1n, 3], [2n, 5]] as const) {
      const req = reconcileRequest({ size });
      const result = await stream.call1({ id, call: { case: "reconcile", value: req }, timeout: { seconds: 30n } });
      assert.equal(result.case, "reconcile");
      assert.deepEqual(result.value, await unaryReconcile(req));
      assert.deepEqual(JSON.parse(new TextDecoder().decode(result.value.status)), { seen: size });
    }
    const fin = reconcileRequest({ size: 7 });
    const result = await stream.call1({ id: 3n, call: { case: "finalize", value: fin } });
    assert.equal(result.case, "finalize");
    assert.deepEqual(result.value, await unaryFinalize(fin));
    assert.equal(result.value.requeueAfter?.seconds, 7n);
    assert.deepEqual(result.value.events.map((e) => e.reason), ["CleanedUp"]);
  });

  test("a terminal or transient failure of the reconciler stays in the response, as in the unary one's", async (t) => {
    const { open, unaryReconcile } = await setUp(t);
    const stream = open();
    for (const [id, fail, terminal] of [[1n, "terminal", true], [2n, "transient", false]] as const) {
      const req = reconcileRequest({ size: 2, fail });
      const result = await stream.call1({ id, call: { case: "reconcile", value: req } });
      assert.equal(result.case, "reconcile");
      assert.deepEqual(result.value, await unaryReconcile(req));
      assert.equal(result.value.error?.terminal, terminal);
      assert.deepEqual(JSON.parse(new TextDecoder().decode(result.value.status)), { seen: 2 }, "the status is sent with the failure");
    }
  });

  test("if a call fails, then its answer is a CallStatus of the code and message the unary call fails with, and the stream goes on", async (t) => {
    const { open, unaryReconcile } = await setUp(t);
    const stream = open();
    const failing: Record<string, [ReconcileInit, Code]> = {
      "an unknown controller": [reconcileRequest({ size: 1 }, { controller: "nope" }), Code.NotFound],
      "an object that is not JSON": [reconcileRequest({ size: 1 }, { object: new TextEncoder().encode("{not json") }), Code.InvalidArgument],
      "an object other than the key's": [reconcileRequest({ size: 1 }, { key: { namespace: "default", name: "other" } }), Code.InvalidArgument],
      "no object name": [reconcileRequest({ size: 1 }, { key: {} }), Code.InvalidArgument],
    };
    let id = 0n;
    for (const [name, [req, code]] of Object.entries(failing)) {
      const result = await stream.call1({ id: ++id, call: { case: "reconcile", value: req } });
      assert.equal(result.case, "error", name);
      const want = await unaryStatus(unaryReconcile(req));
      assert.deepEqual({ code: result.value.code, message: result.value.message }, want, name);
      assert.equal(want.code, code, name);
    }
    const ok = await stream.call1({ id: id + 1n, call: { case: "reconcile", value: reconcileRequest({ size: 4 }) } });
    assert.equal(ok.case, "reconcile", "the stream goes on");
  });

  test("if a Finalize names a controller without a finalizer, then the CallStatus is the unary one's", async (t) => {
    const dir = await mkdtemp(join(tmpdir(), "po-"));
    t.after(() => rm(dir, { recursive: true, force: true }));
    const address = `unix://${join(dir, "sidecar.sock")}`;
    const server = await new Sidecar({ name: "widget-operator", logger: discardLogger }).reconciler<Widget>({ for: widgets }, () => {}).start({ address });
    t.after(() => server.stop());
    const client = new GrpcClient(address);
    t.after(() => client.close());
    const stream = new HostStream(client.bidiStream(SidecarService, "ReconcileStream", ReconcileStreamRequestSchema, ReconcileStreamResponseSchema));
    t.after(() => stream.call.cancel());
    const req = reconcileRequest({ size: 1 });
    const result = await stream.call1({ id: 1n, call: { case: "finalize", value: req } });
    assert.equal(result.case, "error");
    const want = await unaryStatus(client.unary(SidecarService, "Finalize", FinalizeRequestSchema, FinalizeResponseSchema, req));
    assert.deepEqual({ code: result.value.code, message: result.value.message }, want);
    assert.equal(want.code, status.UNIMPLEMENTED);
  });

  test("if a request carries no call, then it is answered INVALID_ARGUMENT and the stream goes on", async (t) => {
    const { open } = await setUp(t);
    const stream = open();
    const result = await stream.call1({ id: 1n, timeout: { seconds: 5n } });
    assert.equal(result.case, "error");
    assert.equal(result.value.code, Code.InvalidArgument);
    assert.match(result.value.message, /the request 1 carries no call: neither reconcile nor finalize/);
    const ok = await stream.call1({ id: 2n, call: { case: "reconcile", value: reconcileRequest({ size: 1 }) } });
    assert.equal(ok.case, "reconcile");
  });

  test("if the call's timeout passes, then its handler's signal aborts, the call is answered once the handler returned, and the stream goes on", async (t) => {
    const { open, seen } = await setUp(t);
    const stream = open();
    // Once its signal aborted, the handler gives an answer sent too early a second to arrive before it returns.
    const late = reconcileRequest({ size: 1, waitForAbort: true, lingerMs: 1000 });
    stream.send({ id: 1n, call: { case: "reconcile", value: late }, timeout: { nanos: 100_000_000 } });
    const answer = await stream.next();
    seen.order.push("answered");
    seen.answered();
    // The host holds the object until this answer: it must not come while the handler still runs.
    assert.deepEqual(seen.order, ["returned", "answered"]);
    assert.equal(answer.id, 1n);
    // The answer is the status a unary call's deadline gives (the host discards it).
    assert.equal(answer.result.case, "error");
    assert.equal(answer.result.value.code, Code.DeadlineExceeded);
    assert.equal(seen.aborted.length, 1);
    assert.ok(seen.aborted[0] instanceof ConnectError && seen.aborted[0].code === Code.DeadlineExceeded, String(seen.aborted[0]));

    // The host's next call comes on the same stream.
    const ok = await stream.call1({ id: 2n, call: { case: "reconcile", value: reconcileRequest({ size: 2 }) }, timeout: { seconds: 30n } });
    assert.equal(ok.case, "reconcile");
  });

  test("if the host cancels the stream while a call runs, then the handler's signal aborts as a unary call's", async (t) => {
    const { open, seen } = await setUp(t);
    const stream = open();
    stream.send({ id: 1n, call: { case: "reconcile", value: reconcileRequest({ size: 1, waitForAbort: true }) } });
    await seen.waiting;
    stream.call.cancel();
    await stream.ended;
    await waitFor(() => seen.aborted.length === 1);
    assert.ok(seen.aborted[0] instanceof ConnectError && seen.aborted[0].code === Code.Canceled, String(seen.aborted[0]));
  });

  test("if the client sends calls without waiting, then they run one at a time and are answered in order", async (t) => {
    const { open, seen } = await setUp(t);
    const stream = open();
    const n = 200;
    for (let i = 1; i <= n; i++) {
      stream.send({ id: BigInt(i), call: { case: "reconcile", value: reconcileRequest({ size: i }) } });
    }
    for (let i = 1; i <= n; i++) {
      const answer = await stream.next();
      assert.equal(answer.id, BigInt(i));
      assert.equal(answer.result.case, "reconcile");
      assert.deepEqual(JSON.parse(new TextDecoder().decode(answer.result.value.status)), { seen: i });
    }
    assert.equal(seen.calls, n);
    assert.equal(seen.maxRunning, 1);
  });

  test("if the host closes its side while a call runs, then the call is answered and the stream ends with OK", async (t) => {
    const { open } = await setUp(t);
    const stream = open();
    stream.send({ id: 1n, call: { case: "reconcile", value: reconcileRequest({ size: 1 }) } });
    stream.call.end();
    const answer = await stream.next();
    assert.equal(answer.result.case, "reconcile");
    assert.equal(await stream.ended, null);
  });

  test("a request larger than maxMessageSize ends the stream with the unary call's RESOURCE_EXHAUSTED", async (t) => {
    const { open, unaryReconcile } = await setUp(t, {}, { maxMessageSize: 1024 });
    const big = reconcileRequest({ size: 1 }, { object: json({ ...widgets, metadata: { namespace: "default", name: "w" }, spec: { size: 1 }, pad: "x".repeat(2000) }) });
    const stream = open();
    assert.equal((await stream.call1({ id: 1n, call: { case: "reconcile", value: reconcileRequest({ size: 1 }) } })).case, "reconcile");
    stream.send({ id: 2n, call: { case: "reconcile", value: big } });
    const ended = await stream.ended;
    assert.equal(ended?.code, status.RESOURCE_EXHAUSTED);
    assert.equal((await unaryStatus(unaryReconcile(big))).code, status.RESOURCE_EXHAUSTED);
  });

  test("if the sidecar stops, then an idle stream ends UNAVAILABLE at once, and a busy one once its call is answered", async (t) => {
    const dir = await mkdtemp(join(tmpdir(), "po-"));
    t.after(() => rm(dir, { recursive: true, force: true }));
    const address = `unix://${join(dir, "sidecar.sock")}`;
    const { sidecar, seen } = newSidecar();
    const server = await sidecar.start({ address });
    const client = new GrpcClient(address);
    t.after(() => client.close());
    const open = () => new HostStream(client.bidiStream(SidecarService, "ReconcileStream", ReconcileStreamRequestSchema, ReconcileStreamResponseSchema));
    const idle = open();
    assert.equal((await idle.call1({ id: 1n, call: { case: "reconcile", value: reconcileRequest({ size: 1 }) } })).case, "reconcile");
    const busy = open();
    busy.send({ id: 1n, call: { case: "reconcile", value: reconcileRequest({ size: 1, waitForAbort: true }) }, timeout: { nanos: 300_000_000 } });
    await seen.waiting;

    const start = Date.now();
    const stopped = server.stop(); // the graceful shutdown timeout is 30 s: the streams end well before
    const idleEnd = await idle.ended;
    assert.equal(idleEnd?.code, status.UNAVAILABLE);
    assert.match(idleEnd.details, /the sidecar is stopping/);
    const answer = await busy.next();
    assert.equal(answer.result.case, "error", "the call in flight is answered (its deadline passed)");
    assert.equal((await busy.ended)?.code, status.UNAVAILABLE);
    await stopped;
    assert.ok(Date.now() - start < 10_000, `stopping took ${Date.now() - start} ms`);
  });
});

/** Waits for cond, checking every 10 ms for at most 10 s. */
async function waitFor(cond: () => boolean): Promise<void> {
  for (let i = 0; i < 1000 && !cond(); i++) {
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  assert.ok(cond(), "the condition held within 10 s");
}
