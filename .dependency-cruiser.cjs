// dependency-cruiser for the TypeScript packages (the SDK and the examples),
// run by `make test-typescript` after eslint. It fails on any import cycle,
// type-only imports included (tsPreCompilationDeps: an `import type` loop is
// a loop in the design even though it leaves no trace in the JavaScript; the
// eslint cycle rules, import/no-cycle and import-x/no-cycle, skip type-only
// imports and have no option to count them), and on any module of the SDK
// importing one of a layer above its own (see "How the SDK is built" in
// sdk/typescript/README.md).

/** The SDK's layers, bottom-up: a module imports only from its own layer and those below. */
const layers = [
  {
    name: "objects, errors, versions",
    modules: [
      "objects", "errors", "field", "conditions", "version", "log", "address", "signals", "deprecation",
      "kinds", "model", "crd", "crdschema", "crdtypes", "yaml", "gen/.+",
    ],
  },
  { name: "cluster, events, watch", modules: ["cluster", "watch", "tracing", "indexes"] },
  { name: "handler types", modules: ["context", "admission", "reconcile", "conversion"] },
  { name: "registry and description", modules: ["registry", "describe"] },
  {
    name: "dispatch and serving",
    modules: ["dispatch", "dispatch-admission", "dispatch-reconcile", "dispatch-conversion", "service", "call", "stream", "wire", "health", "reflection", "serve"],
  },
  { name: "the Sidecar facade", modules: ["sidecar"] },
  { name: "entry points", modules: ["index", "testing", "crd-cli"] },
];

const sdk = "^sdk/typescript/src/";
const modulePath = (modules) => `${sdk}(?:${modules.join("|")})\\.ts$`;

module.exports = {
  forbidden: [
    {
      name: "no-circular",
      severity: "error",
      comment: "An import cycle, type-only imports included: move what both sides need into a module below them.",
      from: {},
      to: { circular: true },
    },
    {
      name: "sdk-module-unlayered",
      severity: "error",
      comment: "Every module of the SDK (tests and test utilities aside) belongs to a layer: add it to `layers` in .dependency-cruiser.cjs.",
      from: { path: `${sdk}.+\\.ts$`, pathNot: [`\\.test\\.ts$`, `\\.testutil\\.ts$`, modulePath(layers.flatMap((l) => l.modules))] },
      to: {},
    },
    ...layers.slice(0, -1).map((layer, i) => ({
      name: `sdk-layer-${i}-imports-above`,
      severity: "error",
      comment: `A module of the layer "${layer.name}" imports from a layer above it: the SDK is layered bottom-up.`,
      from: { path: modulePath(layer.modules) },
      to: { path: modulePath(layers.slice(i + 1).flatMap((l) => l.modules)) },
    })),
  ],
  options: {
    // Type-only imports count: a loop through `import type` is a loop.
    tsPreCompilationDeps: true,
    doNotFollow: { path: "node_modules" },
    exclude: { path: ["/dist/", "node_modules"] },
  },
};
