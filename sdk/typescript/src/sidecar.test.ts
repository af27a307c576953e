import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { describe, test } from "node:test";

import { Code, ConnectError } from "@connectrpc/connect";

import { setCondition, type Condition } from "./conditions.js";
import { PROTOCOL_VERSION, SDK_NAME, SDK_VERSION } from "./describe.js";
import { DeniedError, TemporaryError, TerminalError } from "./errors.js";
import { field } from "./field.js";
import { FailurePolicy, Operation } from "./gen/polyop/v1alpha1/admission_pb.js";
import { ProtocolVersion, UpdateFilter } from "./gen/polyop/v1alpha1/describe_pb.js";
import { discardLogger, jsonLogger } from "./log.js";
import type { KubeObject } from "./objects.js";
import { childrenComplete } from "./reconcile.js";
import { Sidecar } from "./sidecar.js";
import { FakeCluster, Harness } from "./testing.js";

type Widget = KubeObject<{ size: number }, { phase?: string; conditions?: Condition[] }>;
const widgets = { apiVersion: "example.com/v1", kind: "Widget" };
const configMaps = { apiVersion: "v1", kind: "ConfigMap" };

function widget(name = "w", size = 1): Widget {
  return { ...widgets, metadata: { namespace: "default", name, generation: 2 }, spec: { size } };
}

function newSidecar() {
  return new Sidecar({ name: "widget-operator", logger: discardLogger });
}

describe("Describe", () => {
  test("is built from the registrations", () => {
    const sidecar = newSidecar()
      .reconciler<Widget>(
        {
          for: widgets,
          updateFilters: ["GenerationChanged", "GenerationChanged", "LabelsChanged"],
          labelSelector: "app=web",
          namespaces: ["a", "b"],
          maxConcurrentReconciles: 4,
          owns: [
            { ...configMaps, sendObserved: true },
            { apiVersion: "batch/v1", kind: "Job", adopt: true, replaceOnImmutable: true },
          ],
          watches: [{ apiVersion: "v1", kind: "Secret", fieldPath: "spec.secretName" }],
          finalizer: "example.com/cleanup",
          skipUnchangedInputs: true,
        },
        () => {},
      )
      .finalizer(widgets, () => {})
      .reconciler({ for: configMaps, name: "configmaps" }, () => {})
      .defaulter<Widget>({ for: widgets, failurePolicy: "Ignore" }, () => {})
      .validator<Widget>({ for: widgets, operations: ["CREATE", "UPDATE", "DELETE"], timeoutSeconds: 5 }, () => {})
      .converter({ group: "example.com", kind: "Widget", versions: ["v1", "v2"] }, (o) => o);
    const d = sidecar.describe();
    assert.equal(d.protocolVersion, ProtocolVersion.V1ALPHA1);
    assert.equal(d.name, "widget-operator");
    assert.deepEqual([d.sdkName, d.sdkVersion], ["polyop-typescript", SDK_VERSION]);
    assert.deepEqual(
      d.controllers.map((c) => c.name),
      ["widget", "configmaps"],
    );
    const c = d.controllers[0]!;
    assert.deepEqual({ ...c.forKind, $typeName: undefined }, { $typeName: undefined, group: "example.com", version: "v1", kind: "Widget" });
    assert.deepEqual(c.predicates?.updateFilters, [UpdateFilter.GENERATION_CHANGED, UpdateFilter.LABELS_CHANGED]);
    assert.equal(c.predicates?.labelSelector, "app=web");
    assert.deepEqual(c.namespaces, ["a", "b"]);
    assert.equal(c.maxConcurrentReconciles, 4);
    assert.deepEqual([c.skipUnchangedInputs, d.controllers[1]?.skipUnchangedInputs], [true, false]);
    assert.equal(c.owns[0]?.kind?.kind, "ConfigMap");
    assert.equal(c.owns[0]?.sendObserved, true);
    assert.equal(c.owns[0]?.adopt, false);
    assert.equal(c.owns[0]?.replaceOnImmutable, false);
    assert.equal(c.owns[1]?.kind?.kind, "Job");
    assert.equal(c.owns[1]?.sendObserved, false);
    assert.equal(c.owns[1]?.adopt, true);
    assert.equal(c.owns[1]?.replaceOnImmutable, true);
    assert.deepEqual(c.watches[0]?.mapping, { case: "fieldPath", value: "spec.secretName" });
    assert.equal(c.finalizer, "example.com/cleanup");
    assert.equal(d.controllers[1]?.predicates, undefined, "no predicates: every event");
    assert.equal(d.webhooks.length, 1, "the defaulter and the validator of a kind share one webhook");
    const w = d.webhooks[0]!;
    assert.equal(w.default, true);
    assert.equal(w.validate, true);
    assert.equal(w.failurePolicy, FailurePolicy.IGNORE);
    assert.equal(w.timeoutSeconds, 5);
    assert.deepEqual(w.operations, [Operation.CREATE, Operation.UPDATE, Operation.DELETE]);
    assert.deepEqual(d.conversions.map((c) => [c.kind?.group, c.kind?.kind, c.versions]), [["example.com", "Widget", ["v1", "v2"]]]);
  });

  test("names the protocol version of the generated code, and the SDK as package.json does", () => {
    assert.equal(PROTOCOL_VERSION, ProtocolVersion.V1ALPHA1);
    assert.equal(SDK_NAME, "polyop-typescript");
    const pkg = JSON.parse(readFileSync(new URL("../package.json", import.meta.url), "utf8")) as { name: string; version: string };
    assert.equal(pkg.name, "@polyop/sidecar");
    assert.equal(SDK_VERSION, pkg.version, "SDK_VERSION (src/describe.ts) must be package.json's version");
  });

  test("records the host's Cluster service address for ctx.cluster", async () => {
    const sidecar = newSidecar().reconciler<Widget>({ for: widgets }, () => {});
    assert.throws(() => sidecar.cluster, /address of the host's Cluster service is unknown/);
    sidecar.service.describe({ $typeName: "polyop.v1alpha1.DescribeRequest", protocolVersion: ProtocolVersion.V1ALPHA1, hostVersion: "test", clusterAddress: "unix:///tmp/po-none.sock" });
    assert.equal((sidecar.cluster as { address?: string }).address, "unix:///tmp/po-none.sock");
  });

  const invalid: Record<string, [(s: Sidecar) => unknown, RegExp]> = {
    "if two controllers share a name, then the second is refused": [
      (s) => s.reconciler({ for: widgets }, () => {}).reconciler({ for: widgets }, () => {}),
      /already registered/,
    ],
    "if the kind has no apiVersion, then it is refused": [(s) => s.reconciler({ for: { apiVersion: "", kind: "Widget" } }, () => {}), /needs an apiVersion/],
    "if the name has capitals, then it is refused": [(s) => s.reconciler({ for: widgets, name: "Widgets" }, () => {}), /lower-case/],
    "if an update filter is unknown, then it is refused": [
      (s) => s.reconciler({ for: widgets, updateFilters: ["SpecChanged" as never] }, () => {}),
      /not an update filter/,
    ],
    "if a finalizer comes without a finalize function, then it is refused": [
      (s) => s.reconciler({ for: widgets, finalizer: "example.com/x" }, () => {}).describe(),
      /go together/,
    ],
    "if a watch names two mappings, then it is refused": [
      (s) => s.reconciler({ for: widgets, watches: [{ ...configMaps, label: "a", annotation: "b" }] }, () => {}),
      /exactly one of/,
    ],
    "if the defaulter and validator of a kind disagree, then the second is refused": [
      (s) => s.defaulter({ for: widgets, timeoutSeconds: 3 }, () => {}).validator({ for: widgets, timeoutSeconds: 4 }, () => {}),
      /timeoutSeconds differs/,
    ],
    "if a webhook timeout is above 30 seconds, then it is refused": [(s) => s.validator({ for: widgets, timeoutSeconds: 31 }, () => {}), /1 to 30/],
  };
  for (const [name, [register, error]] of Object.entries(invalid)) {
    test(name, () => assert.throws(() => register(newSidecar()), error));
  }

  test("if the sidecar name is not a DNS label, then it is refused", () => {
    assert.throws(() => new Sidecar({ name: "Widget_Operator" }), /must be lower-case/);
  });
});

describe("Reconcile", () => {
  test("sends the status the reconciler set, its events and its decision", async () => {
    const sidecar = newSidecar().reconciler<Widget>({ for: widgets }, (w, ctx) => {
      w.status = { phase: "Ready" };
      setCondition(w.status, { type: "Ready", status: "True", reason: "Sized", observedGeneration: w.metadata.generation });
      ctx.event("Normal", "Sized", `size ${w.spec.size}`);
      ctx.event("Warning", "Big", "it is big", { action: "Checking" });
      assert.deepEqual(ctx.key, { namespace: "default", name: "w" });
      assert.equal(ctx.retries, 3);
      assert.equal(ctx.controller, "widget");
      assert.equal(ctx.kind.kind, "Widget");
      return { requeueAfter: 90_500 };
    });
    const out = await new Harness(sidecar).reconcile(widget(), { retries: 3 });
    assert.equal(out.error, undefined);
    assert.equal(out.status?.phase, "Ready");
    assert.equal(out.status?.conditions?.[0]?.observedGeneration, 2);
    assert.equal(out.requeueAfter, 90_500);
    assert.deepEqual(out.events, [
      { type: "Normal", reason: "Sized", message: "size 1" },
      { type: "Warning", reason: "Big", message: "it is big", action: "Checking" },
    ]);
  });

  test("if the reconciler throws, then the error is transient and the status is still sent", async () => {
    const sidecar = newSidecar().reconciler<Widget>({ for: widgets }, async (w) => {
      w.status = { phase: "Failed" };
      throw new Error("the backend is down");
    });
    const out = await new Harness(sidecar).reconcile(widget());
    assert.deepEqual(out.error, { message: "the backend is down", terminal: false });
    assert.equal(out.status?.phase, "Failed");
  });

  test("if the reconciler throws, then the error is logged at debug level only: the host logs it", async () => {
    const lines: { level: string; msg: string }[] = [];
    const logger = jsonLogger({ level: "debug", write: (line) => lines.push(JSON.parse(line)) });
    const sidecar = new Sidecar({ name: "widget-operator", logger }).reconciler<Widget>({ for: widgets }, () => {
      throw new Error("the backend is down");
    });
    await new Harness(sidecar).reconcile(widget());
    const errors = lines.filter((l) => l.msg === "Reconciler error");
    assert.deepEqual(
      errors.map((l) => l.level),
      ["debug"],
    );
  });

  test("if the reconciler throws a TerminalError, then the error is terminal", async () => {
    const sidecar = newSidecar().reconciler<Widget>({ for: widgets }, () => {
      throw new TerminalError(new Error("size must not be negative"));
    });
    const out = await new Harness(sidecar).reconcile(widget());
    assert.deepEqual(out.error, { message: "size must not be negative", terminal: true });
  });

  test("if the reconciler throws a TemporaryError, then the failure says when to retry", async () => {
    const sidecar = newSidecar().reconciler<Widget>({ for: widgets }, (w) => {
      w.status = { phase: "Waiting" };
      throw new TemporaryError(new Error("the database is starting"), { retryAfter: 1500.2 });
    });
    const out = await new Harness(sidecar).reconcile(widget());
    assert.deepEqual(out.error, { message: "the database is starting", terminal: false, retryAfter: 1501 });
    assert.equal(out.status?.phase, "Waiting");
    assert.equal(out.requeueAfter, undefined);
  });

  test("a TemporaryError needs a delay above zero", () => {
    for (const retryAfter of [0, -1, Number.NaN, Number.POSITIVE_INFINITY]) {
      assert.throws(() => new TemporaryError("x", { retryAfter }), RangeError, String(retryAfter));
    }
    assert.equal(new TemporaryError("x", { retryAfter: 10 }).retryAfter, 10);
  });

  test("if the reconciler leaves no status, then none is sent", async () => {
    const sidecar = newSidecar().reconciler<Widget>({ for: widgets }, () => undefined);
    const out = await new Harness(sidecar).reconcile(widget());
    assert.equal(out.status, undefined);
    assert.equal(out.error, undefined);
    assert.equal(out.requeueAfter, undefined);
  });

  test("sends desired children of the owned kinds, and refuses others", async () => {
    const child = { ...configMaps, metadata: { name: "w-config" }, data: { size: "1" } };
    const sidecar = newSidecar()
      .reconciler<Widget>({ for: widgets, owns: [configMaps] }, () => childrenComplete([child], { requeueAfter: 1000 }))
      .reconciler<Widget>({ for: widgets, name: "wrong" }, () => ({ desiredChildren: [child] }));
    const tester = new Harness(sidecar);
    const out = await tester.reconcile(widget(), { controller: "widget" });
    assert.deepEqual(out.desiredChildren, [child]);
    assert.equal(out.childrenComplete, true);
    const wrong = await tester.reconcile(widget(), { controller: "wrong" });
    assert.equal(wrong.error?.terminal, true);
    assert.match(wrong.error?.message ?? "", /does not declare in owns/);
    assert.deepEqual(wrong.desiredChildren, []);
  });

  test("passes the observed children of each kind declared with sendObserved, and refuses other kinds", async () => {
    const secrets = { apiVersion: "v1", kind: "Secret" };
    const jobs = { apiVersion: "batch/v1", kind: "Job" };
    const seen: Record<string, unknown> = {};
    const sidecar = newSidecar().reconciler<Widget>(
      { for: widgets, owns: [{ ...configMaps, sendObserved: true }, { ...secrets, sendObserved: true }, jobs] },
      (_w, ctx) => {
        seen.configMaps = ctx.observedChildren(configMaps).map((c) => c.metadata.name);
        seen.secrets = ctx.observedChildren(secrets).map((c) => c.metadata.name);
        assert.throws(() => ctx.observedChildren(jobs), /sent no observed children of Job \(batch\/v1\): declare it in owns with sendObserved: true/);
        assert.throws(() => ctx.observedChildren({ apiVersion: "v1", kind: "Pod" }), /sendObserved/);
      },
    );
    const out = await new Harness(sidecar).reconcile(widget(), {
      observedChildren: [
        { ...configMaps, metadata: { name: "c1" } },
        { ...secrets, metadata: { name: "s1" } },
        { ...configMaps, metadata: { name: "c2" } },
      ],
    });
    assert.equal(out.error, undefined, out.error?.message);
    assert.deepEqual(seen, { configMaps: ["c1", "c2"], secrets: ["s1"] });
  });

  test("if the object is gone, then the deleted handler is called, or nothing", async () => {
    const gone: string[] = [];
    const sidecar = newSidecar()
      .reconciler({ for: widgets }, () => assert.fail("not for a gone object"))
      .deleted(widgets, (ctx) => void gone.push(ctx.key.name))
      .reconciler({ for: configMaps }, () => assert.fail("not for a gone object"));
    const tester = new Harness(sidecar);
    assert.equal((await tester.reconcileDeleted(widgets, { namespace: "default", name: "w" })).error, undefined);
    assert.equal((await tester.reconcileDeleted(configMaps, { namespace: "default", name: "c" })).error, undefined);
    assert.deepEqual(gone, ["w"]);
  });

  const refused: Record<string, [Partial<Parameters<Sidecar["service"]["reconcile"]>[0]>, Code, RegExp]> = {
    "if the controller is unknown, then NOT_FOUND": [{ controller: "nope" }, Code.NotFound, /has no controller named "nope"/],
    "if the request names no object, then INVALID_ARGUMENT": [{ key: { $typeName: "polyop.v1alpha1.ObjectKey", namespace: "", name: "" } }, Code.InvalidArgument, /no object name/],
    "if the object is not JSON, then INVALID_ARGUMENT": [{ object: new TextEncoder().encode("{") }, Code.InvalidArgument, /decoding/],
    "if the object is another than the key's, then INVALID_ARGUMENT": [
      { key: { $typeName: "polyop.v1alpha1.ObjectKey", namespace: "default", name: "other" } },
      Code.InvalidArgument,
      /but the request is for default\/other/,
    ],
  };
  for (const [name, [override, code, message]] of Object.entries(refused)) {
    test(name, async () => {
      const sidecar = newSidecar().reconciler<Widget>({ for: widgets }, () => {});
      const req = {
        $typeName: "polyop.v1alpha1.ReconcileRequest" as const,
        controller: "widget",
        key: { $typeName: "polyop.v1alpha1.ObjectKey" as const, namespace: "default", name: "w" },
        object: new TextEncoder().encode(JSON.stringify(widget())),
        retries: 0,
        observedChildren: [],
        cacheVersions: [],
        ...override,
      };
      await assert.rejects(Promise.resolve().then(() => sidecar.service.reconcile(req, { signal: new AbortController().signal })), (err: unknown) => {
        assert.ok(err instanceof ConnectError);
        assert.equal(err.code, code);
        assert.match(err.rawMessage, message);
        return true;
      });
    });
  }

  test("ctx.cluster is the sidecar's Cluster", async () => {
    const cluster = new FakeCluster([{ ...configMaps, metadata: { namespace: "default", name: "settings" } }]);
    const sidecar = newSidecar()
      .useCluster(cluster)
      .reconciler<Widget>({ for: widgets }, async (w, ctx) => {
        const cm = await ctx.cluster.get(configMaps, { namespace: "default", name: "settings" });
        w.status = { phase: cm.metadata.uid ? "Found" : "Missing" };
      });
    assert.equal((await new Harness(sidecar).reconcile(widget())).status?.phase, "Found");
  });
});

describe("Finalize", () => {
  test("calls the finalizer with the object and reports its decision", async () => {
    const sidecar = newSidecar()
      .reconciler<Widget>({ for: widgets, finalizer: "example.com/cleanup" }, () => {})
      .finalizer<Widget>(widgets, (w, ctx) => {
        ctx.event("Normal", "CleaningUp", w.metadata.name);
        return w.spec.size > 1 ? { requeueAfter: 5000 } : undefined;
      });
    const tester = new Harness(sidecar);
    const waiting = await tester.finalize(widget("big", 2));
    assert.equal(waiting.requeueAfter, 5000);
    assert.deepEqual(waiting.events, [{ type: "Normal", reason: "CleaningUp", message: "big" }]);
    const done = await tester.finalize(widget("small", 1));
    assert.equal(done.requeueAfter, undefined);
    assert.equal(done.error, undefined);
  });

  test("if the finalizer throws, then the failure is reported, with its delay for a TemporaryError", async () => {
    const sidecar = newSidecar()
      .reconciler<Widget>({ for: widgets, finalizer: "example.com/cleanup" }, () => {})
      .finalizer(widgets, () => Promise.reject(new TerminalError("cannot")), { controller: "widget" })
      .reconciler<Widget>({ for: widgets, name: "later", finalizer: "example.com/later" }, () => {})
      .finalizer(widgets, () => Promise.reject(new TemporaryError("busy", { retryAfter: 2000 })), { controller: "later" });
    const harness = new Harness(sidecar);
    assert.deepEqual((await harness.finalize(widget(), { controller: "widget" })).error, { message: "cannot", terminal: true });
    assert.deepEqual((await harness.finalize(widget(), { controller: "later" })).error, { message: "busy", terminal: false, retryAfter: 2000 });
  });
});

describe("Default and Validate", () => {
  const admission = () =>
    newSidecar()
      .defaulter<Widget>({ for: widgets }, (w, ctx) => {
        if (w.spec.size === 13) {
          throw new DeniedError("13 is unlucky");
        }
        if (w.spec.size === 0) {
          w.spec.size = 1;
          ctx.warn("size defaulted to 1");
        }
      })
      .validator<Widget>({ for: widgets, operations: ["CREATE", "UPDATE", "DELETE"] }, (w, ctx) => {
        if (ctx.operation === "DELETE") {
          if (w.metadata.labels?.["protected"]) {
            throw new DeniedError(`${w.metadata.name} is protected`);
          }
          return [];
        }
        if (ctx.oldObject && ctx.oldObject.spec.size > w.spec.size) {
          throw new DeniedError("", [field.forbidden("spec.size", "may not shrink")]);
        }
        if (w.spec.size < 0) {
          throw new DeniedError("", [field.invalid("spec.size", w.spec.size, "must not be negative")]);
        }
        if (w.spec.size > 100) {
          throw new Error("validation backend unavailable");
        }
        return undefined;
      });

  test("a defaulter's changes come back as the object, with warnings", async () => {
    const out = await new Harness(admission()).default(widget("w", 0));
    assert.equal(out.allowed, true);
    assert.equal(out.object.spec.size, 1);
    assert.deepEqual(out.warnings, ["size defaulted to 1"]);
  });

  test("if the defaulter changes nothing, then no object comes back", async () => {
    const resp = await admission().service.default(
      {
        $typeName: "polyop.v1alpha1.DefaultRequest",
        request: {
          $typeName: "polyop.v1alpha1.AdmissionRequest",
          uid: "1",
          kind: { $typeName: "polyop.v1alpha1.GroupVersionKind", group: "example.com", version: "v1", kind: "Widget" },
          resource: "widgets",
          subresource: "",
          key: { $typeName: "polyop.v1alpha1.ObjectKey", namespace: "default", name: "w" },
          operation: Operation.CREATE,
          object: new TextEncoder().encode(JSON.stringify(widget("w", 5))),
          oldObject: new Uint8Array(),
          dryRun: false,
        },
      },
      { signal: new AbortController().signal },
    );
    assert.equal(resp.object.length, 0);
  });

  test("a handler that fails once its call's deadline passed fails the call rather than deny", async () => {
    const slow = new Sidecar({ name: "slow", logger: discardLogger })
      .defaulter<Widget>({ for: widgets }, async (_w, ctx) => {
        await new Promise((resolve) => ctx.signal.addEventListener("abort", resolve, { once: true }));
        throw new DeniedError("too late to decide");
      })
      .validator<Widget>({ for: widgets }, async (_w, ctx) => {
        await new Promise((resolve) => ctx.signal.addEventListener("abort", resolve, { once: true }));
        throw new Error("the quota service did not answer");
      });
    const request = {
      $typeName: "polyop.v1alpha1.AdmissionRequest" as const,
      uid: "1",
      kind: { $typeName: "polyop.v1alpha1.GroupVersionKind" as const, group: "example.com", version: "v1", kind: "Widget" },
      resource: "widgets",
      subresource: "",
      key: { $typeName: "polyop.v1alpha1.ObjectKey" as const, namespace: "default", name: "w" },
      operation: Operation.CREATE,
      object: new TextEncoder().encode(JSON.stringify(widget("w", 5))),
      oldObject: new Uint8Array(),
      dryRun: false,
    };
    const deadline = (code: Code) => {
      const controller = new AbortController();
      setTimeout(() => controller.abort(new ConnectError("the host's deadline passed", code)), 10);
      return controller.signal;
    };
    const isCode = (code: Code) => (err: unknown) => err instanceof ConnectError && err.code === code;
    await assert.rejects(
      Promise.resolve(slow.service.default({ $typeName: "polyop.v1alpha1.DefaultRequest", request }, { signal: deadline(Code.DeadlineExceeded) })),
      isCode(Code.DeadlineExceeded),
    );
    await assert.rejects(
      Promise.resolve(slow.service.validate({ $typeName: "polyop.v1alpha1.ValidateRequest", request }, { signal: deadline(Code.Canceled) })),
      isCode(Code.Canceled),
    );
  });

  test("a DeniedError from a defaulter denies", async () => {
    const out = await new Harness(admission()).default(widget("w", 13));
    assert.deepEqual(out.denied, { message: "13 is unlucky", fieldErrors: [] });
  });

  test("a DeniedError may carry its own code and reason", async () => {
    const sidecar = new Sidecar({ name: "ports", logger: discardLogger }).validator<Widget>({ for: widgets }, () => {
      throw new DeniedError("the port is taken by web-2", [], { code: 409, reason: "AlreadyExists" });
    });
    const out = await new Harness(sidecar).validate(widget("w", 1));
    assert.deepEqual(out.denied, { message: "the port is taken by web-2", fieldErrors: [], code: 409, reason: "AlreadyExists" });
    assert.equal(new DeniedError("x", [], { code: 409 }).reason, "");
    assert.throws(() => new DeniedError("fine", [], { code: 200 }), RangeError);
  });

  const validations: Record<string, [Widget, Widget | undefined, "CREATE" | "UPDATE" | "DELETE" | undefined, unknown]> = {
    "a valid object is allowed": [widget("w", 5), undefined, undefined, undefined],
    "field errors deny with the fields": [
      widget("w", -1),
      undefined,
      undefined,
      { message: "spec.size: Invalid value: -1: must not be negative", fieldErrors: [{ field: "spec.size", type: "Invalid", badValue: -1, detail: "must not be negative" }] },
    ],
    "the old object is passed on update": [
      widget("w", 1),
      widget("w", 2),
      undefined,
      { message: "spec.size: Forbidden: may not shrink", fieldErrors: [{ field: "spec.size", type: "Forbidden", detail: "may not shrink" }] },
    ],
    "on delete the validator gets the old object": [
      { ...widget("w", 1), metadata: { namespace: "default", name: "w", labels: { protected: "yes" } } },
      undefined,
      "DELETE",
      { message: "w is protected", fieldErrors: [] },
    ],
    "an unexpected error denies with its message": [widget("w", 101), undefined, undefined, { message: "validation backend unavailable", fieldErrors: [] }],
  };
  for (const [name, [obj, oldObject, operation, want]] of Object.entries(validations)) {
    test(name, async () => {
      const out = await new Harness(admission()).validate(obj, { ...(oldObject ? { old: oldObject } : {}), ...(operation ? { operation } : {}) });
      assert.deepEqual(out.denied, want);
      assert.equal(out.allowed, want === undefined);
    });
  }

  test("a harness call sets the operation, old object, dry run, subresource and requesting user", async () => {
    let seen: unknown;
    const sidecar = newSidecar().validator<Widget>({ for: widgets }, (w, ctx) => {
      seen = {
        size: w.spec.size,
        operation: ctx.operation,
        old: ctx.oldObject?.spec.size,
        dryRun: ctx.dryRun,
        subresource: ctx.subresource,
        user: ctx.userInfo,
      };
    });
    const harness = new Harness(sidecar);
    await harness.validate(widget("w", 2), {
      operation: "UPDATE",
      old: widget("w", 1),
      dryRun: true,
      subresource: "status",
      user: { username: "alice", uid: "u-1", groups: ["devs"], extra: { scopes: ["a", "b"] } },
    });
    assert.deepEqual(seen, {
      size: 2,
      operation: "UPDATE",
      old: 1,
      dryRun: true,
      subresource: "status",
      user: { username: "alice", uid: "u-1", groups: ["devs"], extra: { scopes: ["a", "b"] } },
    });
    await harness.validate(widget("w", 2));
    assert.deepEqual(seen, {
      size: 2,
      operation: "CREATE",
      old: undefined,
      dryRun: false,
      subresource: "",
      user: { username: "tester", uid: "", groups: [], extra: {} },
    });
  });

});

describe("Convert", () => {
  const sidecar = () =>
    newSidecar().converter({ group: "example.com", kind: "Widget", versions: ["v1", "v2"] }, (obj, to) => {
      const w = obj as Widget & { spec: { size?: number; replicas?: number } };
      if (to === "example.com/v2") {
        return { ...w, apiVersion: to, spec: { replicas: w.spec.size } };
      }
      if (w.spec.replicas === undefined) {
        throw new Error("no replicas");
      }
      return { ...w, apiVersion: to, spec: { size: w.spec.replicas } };
    });

  test("converts each object, and passes those already at the version", async () => {
    const v2 = { apiVersion: "example.com/v2", kind: "Widget", metadata: { name: "b" }, spec: { replicas: 7 } };
    const out = await new Harness(sidecar()).convert([widget("a", 3), v2], "example.com/v2");
    assert.deepEqual(out, [{ apiVersion: "example.com/v2", kind: "Widget", metadata: { namespace: "default", name: "a", generation: 2 }, spec: { replicas: 3 } }, v2]);
  });

  test("if a conversion fails, then the whole request fails with its message", async () => {
    const broken = { apiVersion: "example.com/v2", kind: "Widget", metadata: { name: "b" }, spec: {} };
    await assert.rejects(new Harness(sidecar()).convert([broken], "example.com/v1"), /no replicas/);
  });
});

describe("Calls the sidecar declares nothing for", () => {
  const gadgets = { apiVersion: "example.com/v1", kind: "Gadget" };
  const gadget = { ...gadgets, metadata: { namespace: "default", name: "g" }, spec: {} };
  const code = (want: Code, message: RegExp) => (err: unknown) => {
    assert.ok(err instanceof ConnectError, String(err));
    assert.equal(Code[err.code], Code[want], err.rawMessage);
    assert.match(err.rawMessage, message);
    return true;
  };
  const full = () =>
    newSidecar()
      .reconciler<Widget>({ for: widgets, finalizer: "example.com/cleanup" }, () => {})
      .finalizer(widgets, () => {})
      .reconciler({ for: gadgets }, () => {})
      .defaulter<Widget>({ for: widgets }, () => {})
      .validator<Widget>({ for: widgets }, () => {})
      .converter({ group: "example.com", kind: "Widget", versions: ["v1", "v2"] }, (o) => o);

  test("if the sidecar has none for the controller or kind, then NOT_FOUND names it", async () => {
    const harness = new Harness(full());
    await assert.rejects(harness.finalize(gadget, { controller: "gadget" }), code(Code.NotFound, /controller "gadget" declares no finalizer/));
    await assert.rejects(harness.default(gadget), code(Code.NotFound, /has no defaulter for Gadget \(example.com\/v1\)/));
    await assert.rejects(harness.validate(gadget), code(Code.NotFound, /has no validator for Gadget \(example.com\/v1\)/));
    await assert.rejects(harness.convert([gadget], "example.com/v2"), code(Code.NotFound, /has no converter for Gadget.example.com/));
    await assert.rejects(harness.reconcile(gadget, { controller: "nope" }), code(Code.NotFound, /has no controller named "nope"/));
  });

  test("if the sidecar serves the method for no kind at all, then UNIMPLEMENTED", async () => {
    const reconcileOnly = new Harness(newSidecar().reconciler({ for: gadgets }, () => {}));
    await assert.rejects(reconcileOnly.finalize(gadget), code(Code.Unimplemented, /declares no finalizer: it serves no Finalize/));
    await assert.rejects(reconcileOnly.default(gadget), code(Code.Unimplemented, /registers no defaulter: it serves no Default/));
    await assert.rejects(reconcileOnly.validate(gadget), code(Code.Unimplemented, /registers no validator: it serves no Validate/));
    await assert.rejects(reconcileOnly.convert([gadget], "example.com/v2"), code(Code.Unimplemented, /registers no converter: it serves no Convert/));
    const webhookOnly = new Harness(newSidecar().validator({ for: gadgets }, () => {}));
    await assert.rejects(webhookOnly.reconcile(gadget, { controller: "gadget" }), code(Code.Unimplemented, /registers no controller: it serves no Reconcile/));
  });
});

describe("field errors", () => {
  test("tooLong counts bytes and tooLongCharacters characters, as apimachinery's TooLong and TooLongCharacters", () => {
    assert.deepEqual(field.tooLong("spec.name", "x", 3), { field: "spec.name", type: "TooLong", badValue: "x", detail: "may not be more than 3 bytes" });
    assert.deepEqual(field.tooLongCharacters("spec.name", "x", 3), {
      field: "spec.name",
      type: "TooLong",
      badValue: "x",
      detail: "may not be more than 3 characters",
    });
  });
});
