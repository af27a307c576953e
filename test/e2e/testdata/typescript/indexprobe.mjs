// A sidecar for the end-to-end test of declared indexes in the TypeScript SDK,
// the counterpart of testsidecar index: it reconciles Secrets and, for each,
// lists the ConfigMaps of its namespace by two declared indexes, from the
// host's cache — ".metadata.controller" (a field path: the controller owner's
// name) and "parent" (CEL: data.parent) — and applies what it found to the
// ConfigMap <secret>-summary: byController and byParent (sorted,
// comma-separated) and source ("Cache" when both Lists came from the cache).
// It asks to be reconciled again every 200ms.
//
//     node indexprobe.mjs unix:///path/to/sidecar.sock
import { shutdownSignal, Sidecar } from "@polyop/sidecar";

const configMaps = { apiVersion: "v1", kind: "ConfigMap" };
const sidecar = new Sidecar({ name: "index-probe" })
  .index({ ...configMaps, name: ".metadata.controller", path: ".metadata.ownerReferences[?(@.controller==true)].name" })
  .index({ ...configMaps, name: "parent", cel: "has(object.data) && has(object.data.parent) ? [object.data.parent] : []" })
  .cacheKind(configMaps);

const names = (list) => list.items.map((o) => o.metadata.name).sort().join(",");

sidecar.reconciler({ for: { apiVersion: "v1", kind: "Secret" } }, async (secret, ctx) => {
  const { namespace, name } = secret.metadata;
  const byController = await ctx.cluster.list(configMaps, { namespace, fieldSelector: `.metadata.controller=${name}` });
  const byParent = await ctx.cluster.list(configMaps, { namespace, fieldSelector: `parent=${name}` });
  await ctx.cluster.apply(
    {
      ...configMaps,
      metadata: { namespace, name: `${name}-summary` },
      data: {
        byController: names(byController),
        byParent: names(byParent),
        source: byController.source === "cache" && byParent.source === "cache" ? "Cache" : "not the cache",
      },
    },
    { fieldManager: "index-probe", force: true },
  );
  return { requeueAfter: 200 };
});
await sidecar.serve(process.argv[2], { signal: shutdownSignal() });
