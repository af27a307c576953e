import assert from "node:assert/strict";
import { mkdtemp, readdir, readFile, rm, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { describe, test } from "node:test";
import { Type, type Static } from "@sinclair/typebox";
import { crdsOf, defineKind, fileNameOf, KindError, Kube, pluralOf, toYAML } from "./crd.js";
import { main } from "./crd-cli.js";
import { Sidecar } from "./sidecar.js";
import { Harness } from "./testing.js";

const WidgetSpec = Type.Object({
  replicas: Type.Integer({ minimum: 0, default: 1, format: "int32" }),
  color: Type.Optional(Type.Union([Type.Literal("red"), Type.Literal("blue")])),
});

const Widget = defineKind({
  group: "example.com",
  version: "v1",
  kind: "Widget",
  shortNames: ["wd"],
  categories: ["all", "example"],
  description: "A widget.",
  spec: WidgetSpec,
  status: Kube.Status({ replicas: Type.Optional(Type.Integer()), selector: Type.Optional(Type.String()) }),
  printerColumns: [
    { name: "Replicas", type: "integer", jsonPath: ".spec.replicas" },
    { name: "Age", type: "date", jsonPath: ".metadata.creationTimestamp" },
  ],
  selectableFields: [".spec.color"],
  subresources: { scale: { specReplicasPath: ".spec.replicas", statusReplicasPath: ".status.replicas", labelSelectorPath: ".status.selector" } },
});
type Widget = Static<typeof Widget>;

const WidgetV1beta1 = defineKind({
  group: "example.com",
  version: "v1beta1",
  kind: "Widget",
  storage: false,
  deprecated: true,
  deprecationWarning: "example.com/v1beta1 Widget is deprecated; use example.com/v1",
  spec: Type.Object({ size: Type.Integer() }),
});

describe("defineKind and crdsOf", () => {
  test("a kind is a TypeMeta and a TypeBox schema of the whole object", () => {
    assert.equal(Widget.apiVersion, "example.com/v1");
    assert.equal(Widget.kind, "Widget");
    assert.equal(Widget.type, "object");
    assert.deepEqual(Object.keys(Widget.properties), ["apiVersion", "kind", "metadata", "spec", "status"]);
  });

  test("names: plural, singular, listKind, short names, categories, scope", () => {
    const [crd] = crdsOf([Widget]);
    assert.equal(crd!.metadata.name, "widgets.example.com");
    assert.deepEqual(crd!.spec.names, {
      kind: "Widget", listKind: "WidgetList", plural: "widgets", singular: "widget", shortNames: ["wd"], categories: ["all", "example"],
    });
    assert.equal(crd!.spec.scope, "Namespaced");
    assert.equal(fileNameOf(crd!), "example.com_widgets.yaml");
  });

  test("plurals follow English endings", () => {
    assert.deepEqual(["Policy", "Ingress", "Box", "Key", "Widget"].map(pluralOf), ["policies", "ingresses", "boxes", "keys", "widgets"]);
  });

  test("the root schema: apiVersion, kind, metadata, spec required, status", () => {
    const root = crdsOf([Widget])[0]!.spec.versions[0]!.schema.openAPIV3Schema;
    assert.equal(root.description, "A widget.");
    assert.deepEqual(root.required, ["spec"]);
    assert.deepEqual(root.properties!.metadata, { type: "object" });
    assert.deepEqual(root.properties!.spec!.properties!.replicas, { type: "integer", format: "int32", minimum: 0, default: 1 });
  });

  test("an optional spec is left out of required", () => {
    const k = defineKind({ group: "example.com", version: "v1", kind: "Gadget", spec: Type.Optional(Type.Object({})) });
    assert.equal(crdsOf([k])[0]!.spec.versions[0]!.schema.openAPIV3Schema.required, undefined);
  });

  test("the status subresource is on with a status schema, the scale subresource as given", () => {
    const v = crdsOf([Widget])[0]!.spec.versions[0]!;
    assert.deepEqual(v.subresources, {
      status: {},
      scale: { specReplicasPath: ".spec.replicas", statusReplicasPath: ".status.replicas", labelSelectorPath: ".status.selector" },
    });
    const off = defineKind({ group: "example.com", version: "v1", kind: "Quiet", spec: Type.Object({}), status: Type.Object({}), subresources: { status: false } });
    assert.equal(crdsOf([off])[0]!.spec.versions[0]!.subresources, undefined);
  });

  test("printer columns and selectable fields", () => {
    const v = crdsOf([Widget])[0]!.spec.versions[0]!;
    assert.deepEqual(v.additionalPrinterColumns, [
      { name: "Replicas", type: "integer", jsonPath: ".spec.replicas" },
      { name: "Age", type: "date", jsonPath: ".metadata.creationTimestamp" },
    ]);
    assert.deepEqual(v.selectableFields, [{ jsonPath: ".spec.color" }]);
  });

  test("several versions make one CRD with one storage version, GA first", () => {
    const crds = crdsOf([WidgetV1beta1, Widget]);
    assert.equal(crds.length, 1);
    const versions = crds[0]!.spec.versions.map((v) => [v.name, v.served, v.storage, v.deprecated ?? false]);
    assert.deepEqual(versions, [["v1", true, true, false], ["v1beta1", true, false, true]]);
    assert.equal(crds[0]!.spec.versions[1]!.deprecationWarning, "example.com/v1beta1 Widget is deprecated; use example.com/v1");
    assert.deepEqual(crds[0]!.spec.names.shortNames, ["wd"], "kind-wide fields come from whichever version gives them");
    const unserved = defineKind({ group: "example.com", version: "v1alpha1", kind: "Widget", served: false, storage: false, spec: Type.Object({}) });
    assert.equal(crdsOf([Widget, unserved])[0]!.spec.versions[1]!.served, false);
  });

  test("metadata.name may be constrained", () => {
    const k = defineKind({ group: "example.com", version: "v1", kind: "Named", spec: Type.Object({}), metadata: { name: Type.String({ maxLength: 20, pattern: "^[a-z]+$" }) } });
    assert.deepEqual(crdsOf([k])[0]!.spec.versions[0]!.schema.openAPIV3Schema.properties!.metadata, {
      type: "object", properties: { name: { type: "string", maxLength: 20, pattern: "^[a-z]+$" } },
    });
  });

  test("YAML: strings YAML would read as numbers, booleans or null are quoted", () => {
    for (const s of [".5", ".inf", ".NaN", "1", "1e3", "0x1f", "true", "No", "null", "~", "", "-x", "a: b", "a #b", "key:", "[x]", "{x}", "*a", "&a", "!t", "@x", "%x", "`x", "'x", '"x', "x "]) {
      assert.equal(toYAML([s]), `- ${JSON.stringify(s)}\n`, s);
    }
    for (const s of ["x", "v1", ".spec.replicas", "A widget.", "example.com/v1", "a-b_c (d)"]) {
      assert.equal(toYAML([s]), `- ${s}\n`, s);
    }
  });

  test("YAML: sorted keys, quoted when YAML would misread, literal blocks", () => {
    assert.equal(
      toYAML({ b: ["True", "x", 1, { k: "a: b" }], a: { empty: {}, list: [], text: "line one\nline two", nothing: null } }),
      ["a:", "  empty: {}", "  list: []", "  nothing: null", "  text: |-", "    line one", "    line two",
        "b:", '- "True"', "- x", "- 1", '- k: "a: b"', ""].join("\n"),
    );
  });
});

const errors: [string, () => unknown, RegExp][] = [
  ["no storage version among several", () => crdsOf([
    defineKind({ group: "example.com", version: "v1", kind: "Widget", spec: Type.Object({}) }),
    defineKind({ group: "example.com", version: "v2", kind: "Widget", spec: Type.Object({}) }),
  ]), /Widget\.example\.com: none of the versions v1, v2 is the storage version: set storage: true on one/],
  ["two storage versions", () => crdsOf([defineKind({ group: "example.com", version: "v1", kind: "Widget", storage: true, spec: Type.Object({}) }), defineKind({ group: "example.com", version: "v2", kind: "Widget", storage: true, spec: Type.Object({}) })]),
    /versions v1 and v2 are all marked storage: true/],
  ["kind-wide fields that differ", () => crdsOf([
    defineKind({ group: "example.com", version: "v1", kind: "Widget", scope: "Namespaced", spec: Type.Object({}) }),
    defineKind({ group: "example.com", version: "v2", kind: "Widget", scope: "Cluster", storage: false, spec: Type.Object({}) }),
  ]), /Widget\.example\.com: scope differs between versions v1 and v2: give it once, or alike/],
  ["a group without a dot", () => crdsOf([defineKind({ group: "example", version: "v1", kind: "W", spec: Type.Object({}) })]), /at least one dot/],
  ["a lower-case kind", () => crdsOf([defineKind({ group: "example.com", version: "v1", kind: "widget", spec: Type.Object({}) })]), /CamelCase/],
  ["a schema error names the kind, version and field", () => crdsOf([defineKind({ group: "example.com", version: "v1", kind: "W", spec: Type.Object({ x: Type.Any() }) })]),
    /^polyop: W\.example\.com\/v1: spec\.x: Type\.Any has no type/],
  ["a scale path to no field", () => crdsOf([defineKind({ group: "example.com", version: "v1", kind: "W", spec: Type.Object({}), status: Type.Object({}), subresources: { scale: { specReplicasPath: ".spec.replicas", statusReplicasPath: ".status.replicas" } } })]),
    /specReplicasPath ".spec.replicas" must name a field of .spec/],
  ["metadata beyond name", () => crdsOf([defineKind({ group: "example.com", version: "v1", kind: "W", spec: Type.Object({}), metadata: { labels: Type.String() } as never })]),
    /metadata\.labels: a CRD may constrain only metadata\.name and metadata\.generateName/],
  ["a printer column of an unknown type", () => crdsOf([defineKind({ group: "example.com", version: "v1", kind: "W", spec: Type.Object({}), printerColumns: [{ name: "X", type: "text" as never, jsonPath: ".spec" }] })]),
    /printer column "X" has type "text"/],
];

describe("crdsOf: errors name the kind, the version and the field", () => {
  for (const [name, fn, message] of errors) {
    test(name, () => {
      assert.throws(fn, (err: unknown) => {
        assert.ok(err instanceof KindError, String(err));
        assert.match(err.message, message);
        return true;
      });
    });
  }
});

describe("polyop-crd", () => {
  test("writes one file per group and kind from a module's exports", async () => {
    // Inside the SDK, so that the module's import of @sinclair/typebox resolves.
    const here = fileURLToPath(new URL(".", import.meta.url));
    const dir = await mkdtemp(join(here, "crd-cli-test-"));
    try {
      const crdModule = pathToFileURL(join(here, "crd.js")).href;
      const mod = join(dir, "types.mjs");
      await writeFile(
        mod,
        `import { Type } from "@sinclair/typebox";
import { defineKind } from ${JSON.stringify(crdModule)};
export const A = defineKind({ group: "example.com", version: "v1", kind: "Apple", spec: Type.Object({ n: Type.Integer() }) });
export const B1 = defineKind({ group: "example.com", version: "v1", kind: "Box", storage: true, spec: Type.Object({}) });
export const B2 = defineKind({ group: "example.com", version: "v2", kind: "Box", spec: Type.Object({}) });
export const notAKind = 1;
`,
      );
      const out = join(dir, "out");
      const code = await main([mod, "-o", out]);
      assert.equal(code, 0);
      assert.deepEqual((await readdir(out)).sort(), ["example.com_apples.yaml", "example.com_boxes.yaml"]);
      const boxes = await readFile(join(out, "example.com_boxes.yaml"), "utf8");
      assert.match(boxes, /^---\napiVersion: apiextensions\.k8s\.io\/v1\nkind: CustomResourceDefinition\n/);
      assert.match(boxes, /\n {2}- name: v2\n/);
      assert.equal(await main([]), 2);
      assert.equal(await main([join(dir, "missing.mjs")]), 1);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});

describe("Sidecar's registrations with a defined kind", () => {
  test("the defaulter and the validator receive the kind's static type", async () => {
    const sidecar = new Sidecar({ name: "widgets" });
    sidecar.defaulter({ for: Widget }, (widget) => {
      widget.spec.color ??= "blue";
    });
    sidecar.validator({ for: Widget }, (widget, ctx) => {
      if (widget.spec.replicas > 5) {
        ctx.warn("more than 5 replicas");
      }
    });
    const harness = new Harness(sidecar);
    const obj: Widget = { apiVersion: Widget.apiVersion, kind: Widget.kind, metadata: { name: "w", namespace: "ns" }, spec: { replicas: 6 } };
    const defaulted = await harness.default(obj);
    assert.equal(defaulted.object.spec.color, "blue");
    assert.deepEqual((await harness.validate(obj)).warnings, ["more than 5 replicas"]);
  });


  test("the reconciler receives the kind's static type", async () => {
    const sidecar = new Sidecar({ name: "widgets" });
    let seen: Widget | undefined;
    sidecar.reconciler({ for: Widget }, (widget) => {
      // Typed: spec.replicas is a number, spec.color "red" | "blue" | undefined.
      const replicas: number = widget.spec.replicas;
      const color: "red" | "blue" | undefined = widget.spec.color;
      widget.status = { replicas, ...(color ? { selector: `color=${color}` } : {}) };
      seen = widget;
    });
    const harness = new Harness(sidecar);
    const obj: Widget = { apiVersion: Widget.apiVersion, kind: Widget.kind, metadata: { name: "w", namespace: "ns" }, spec: { replicas: 2, color: "red" } };
    const result = await harness.reconcile(obj);
    assert.equal(seen?.spec.replicas, 2);
    assert.deepEqual(result.status, { replicas: 2, selector: "color=red" });
  });
});
