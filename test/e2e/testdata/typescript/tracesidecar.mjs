// A sidecar for the tracing end-to-end test, in TypeScript: it does what the
// Go SDK's testsidecar trace does. Its controller "copier" reconciles
// ConfigMaps, lists the Secrets of the ConfigMap's namespace through the
// host's Cluster service, and desires one Secret, "<name>-copy", holding the
// ConfigMap's data. The SDK sets tracing up from the OTEL_* environment
// variables.
//
//     node tracesidecar.mjs unix:///path/to/sidecar.sock
import { shutdownSignal, Sidecar } from "@polyop/sidecar";

const sidecar = new Sidecar({ name: "tracesidecar" });

sidecar.reconciler(
  { name: "copier", for: { apiVersion: "v1", kind: "ConfigMap" }, owns: [{ apiVersion: "v1", kind: "Secret" }] },
  async (cm, ctx) => {
    const secrets = await ctx.cluster.list({ apiVersion: "v1", kind: "Secret" }, { namespace: cm.metadata.namespace });
    // A span attribute of the user's own, on the handler's span.
    ctx.span.setAttribute("copier.secrets", secrets.items.length);
    ctx.log.info("Copying the ConfigMap", { secrets: secrets.items.length });
    return {
      desiredChildren: [
        { apiVersion: "v1", kind: "Secret", metadata: { name: `${cm.metadata.name}-copy` }, stringData: { ...(cm.data ?? {}) } },
      ],
      childrenComplete: true,
    };
  },
);
await sidecar.serve(process.argv[2], { signal: shutdownSignal() });
