// The shapes the shared vocabulary replaced still work for one release, and
// say so: a DeprecationWarning once per process, a log line where the
// sidecar's logger is at hand.
import assert from "node:assert/strict";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, test, type TestContext } from "node:test";

import { field, type FieldError } from "./field.js";
import { jsonLogger, type LogFields } from "./log.js";
import type { KubeObject } from "./objects.js";
import type { RunningServer } from "./serve.js";
import { Sidecar } from "./sidecar.js";
import { Harness } from "./testing.js";

type Widget = KubeObject<{ size: number }>;
const widgets = { apiVersion: "example.com/v1", kind: "Widget" };
const widget = (size: number): Widget => ({ ...widgets, metadata: { namespace: "shop", name: "w" }, spec: { size } });

const warnings: string[] = [];
process.on("warning", (w) => {
  if (w.name === "DeprecationWarning") {
    warnings.push((w as Error & { code?: string }).code ?? "");
  }
});

/** A sidecar whose log lines are kept in lines. */
function newSidecar(options: { reconcileStream?: boolean; reflection?: boolean } = {}) {
  const lines: LogFields[] = [];
  const sidecar = new Sidecar({ name: "widgets", logger: jsonLogger({ write: (l) => void lines.push(JSON.parse(l) as LogFields) }), ...options });
  return { sidecar, lines };
}

async function socket(t: TestContext): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), "po-"));
  t.after(() => rm(dir, { recursive: true, force: true }));
  return `unix://${join(dir, "sidecar.sock")}`;
}

/** Lets the process emit its queued warnings. */
const warned = () => new Promise((resolve) => setImmediate(resolve));

describe("deprecated shapes", () => {
  test("listen(address) starts the sidecar, as start({ address }) does; its handle is a RunningServer", async (t) => {
    const { sidecar, lines } = newSidecar();
    sidecar.reconciler<Widget>({ for: widgets }, () => {});
    const running: RunningServer = await sidecar.listen(await socket(t));
    assert.match(running.address, /^unix:\/\/.+sidecar\.sock$/);
    await running.stop();
    await warned();
    assert.ok(warnings.includes("POLYOP_LISTEN"));
    assert.ok(lines.some((l) => l["deprecation"] === "POLYOP_LISTEN"));
  });

  test("serve(address, { signal }) serves until the signal aborts", async (t) => {
    const { sidecar } = newSidecar();
    sidecar.reconciler<Widget>({ for: widgets }, () => {});
    const stop = new AbortController();
    const served = sidecar.serve(await socket(t), { signal: stop.signal });
    setTimeout(() => stop.abort(), 50);
    await served;
    await warned();
    assert.ok(warnings.includes("POLYOP_SERVE_ADDRESS"));
  });

  test("the serve options in SidecarOptions are the defaults of ServeOptions", async () => {
    const { sidecar } = newSidecar({ reconcileStream: false });
    sidecar.reconciler<Widget>({ for: widgets }, () => {});
    assert.equal(sidecar.describe().reconcileStream, false);
    await warned();
    assert.ok(warnings.includes("POLYOP_SIDECAR_SERVE_OPTIONS"));
  });

  test("the controller options finalize and deleted are the handlers of finalizer(kind, fn) and deleted(kind, fn)", async () => {
    const calls: string[] = [];
    const { sidecar } = newSidecar();
    sidecar.reconciler<Widget>(
      {
        for: widgets,
        finalizer: "example.com/cleanup",
        finalize: (w) => void calls.push(`finalize ${w.metadata.name}`),
        deleted: (ctx) => void calls.push(`deleted ${ctx.key.name}`),
      },
      () => {},
    );
    const harness = new Harness(sidecar);
    assert.equal((await harness.finalize(widget(1))).error, undefined);
    assert.equal((await harness.reconcileDeleted(widgets, { namespace: "shop", name: "gone" })).error, undefined);
    assert.deepEqual(calls, ["finalize w", "deleted gone"]);
    assert.equal(sidecar.describe().controllers[0]?.finalizer, "example.com/cleanup");
    await warned();
    assert.ok(warnings.includes("POLYOP_FINALIZE_OPTION") && warnings.includes("POLYOP_DELETED_OPTION"));
  });

  test("a validator that returns field errors denies with them, and logs that the shape is deprecated", async () => {
    const { sidecar, lines } = newSidecar();
    sidecar.validator<Widget>({ for: widgets }, (w): FieldError[] => (w.spec.size < 0 ? [field.invalid("spec.size", w.spec.size, "must not be negative")] : []));
    const harness = new Harness(sidecar);
    assert.equal((await harness.validate(widget(1))).allowed, true);
    const denied = await harness.validate(widget(-1));
    assert.equal(denied.allowed, false);
    assert.deepEqual(denied.denied?.fieldErrors, [{ field: "spec.size", type: "Invalid", badValue: -1, detail: "must not be negative" }]);
    assert.ok(lines.some((l) => l["deprecation"] === "POLYOP_VALIDATOR_FIELD_ERRORS"));
  });

  test("ctx.event's action as a string is the action option", async () => {
    const { sidecar } = newSidecar();
    sidecar.reconciler<Widget>({ for: widgets }, (_, ctx) => ctx.event("Normal", "Synced", "done", "Syncing"));
    const out = await new Harness(sidecar).reconcile(widget(1));
    assert.deepEqual(out.events, [{ type: "Normal", reason: "Synced", message: "done", action: "Syncing" }]);
  });

  test("the index option path is fieldPath", () => {
    const { sidecar } = newSidecar();
    sidecar.index({ ...widgets, name: "size", path: ".spec.size" }).reconciler<Widget>({ for: widgets }, () => {});
    assert.deepEqual(sidecar.describe().indexes[0]?.value, { case: "fieldPath", value: ".spec.size" });
    assert.deepEqual(sidecar.declaredIndexes, [{ ...widgets, name: "size", fieldPath: ".spec.size" }]);
  });
});
