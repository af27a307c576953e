// A sidecar for the end-to-end test of the TypeScript SDK's watch: from its
// start, before the host has greeted it, it watches the ConfigMaps of a
// namespace labelled watched=yes (declared with cacheKind, so that the host
// caches them) and prints each event on a line of its own:
//
//     watch: added <name> <data.v>      watch: modified …      watch: deleted …
//     watch: synced                     watch: error <message>
//
// The host needs a controller to run, so it reconciles Secrets, doing
// nothing.
//
//     node watchprobe.mjs unix:///path/to/sidecar.sock <namespace>
import { shutdownSignal, Sidecar } from "@polyop/sidecar";

const [address, namespace] = process.argv.slice(2);
const configMaps = { apiVersion: "v1", kind: "ConfigMap" };
const sidecar = new Sidecar({ name: "watch-probe" })
  .cacheKind({ ...configMaps, namespaces: [namespace] })
  .reconciler({ for: { apiVersion: "v1", kind: "Secret" } }, async () => {});

const signal = shutdownSignal();
const watching = (async () => {
  try {
    for await (const event of sidecar.watch(configMaps, { namespace, labelSelector: "watched=yes", signal })) {
      const { type } = event;
      console.log(type === "synced" ? "watch: synced" : `watch: ${type} ${event.object.metadata.name} ${event.object.data?.v ?? ""}`.trimEnd());
    }
  } catch (err) {
    console.log(`watch: error ${err.message}`);
  }
})();
await sidecar.serve(address, { signal });
await watching;
