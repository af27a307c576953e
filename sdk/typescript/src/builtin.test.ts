// kubernetes-models' typed built-in kinds, as desired children, as the kinds
// of Cluster calls and of observed children: the SDK takes them as they are.
import assert from "node:assert/strict";
import { describe, test } from "node:test";

import { Deployment, type IDeployment } from "kubernetes-models/apps/v1/Deployment";
import { Service } from "kubernetes-models/v1/Service";

import { discardLogger } from "./log.js";
import type { KubeObject } from "./objects.js";
import { childrenComplete } from "./reconcile.js";
import { Sidecar } from "./sidecar.js";
import { FakeCluster, Harness } from "./testing.js";

type App = KubeObject<{ image: string; replicas: number }, { available?: number }>;
const apps = { apiVersion: "example.com/v1", kind: "App" };

function sidecar() {
  return new Sidecar({ name: "apps", logger: discardLogger }).reconciler<App>(
    { for: apps, owns: [{ apiVersion: Deployment.apiVersion, kind: Deployment.kind, sendObserved: true }, Service] },
    async (app, ctx) => {
      // Observed children typed by the class: a Deployment's status, and a name that is a string.
      const [observed] = ctx.observedChildren(Deployment);
      app.status = { available: observed?.status?.availableReplicas ?? 0 };
      const labels = { app: app.metadata.name };
      // The Cluster reads typed by the class too.
      const existing = await ctx.cluster.get(Deployment, { namespace: app.metadata.namespace, name: app.metadata.name }).catch(() => undefined);
      const replicas: number | undefined = existing?.spec?.replicas;
      const deployment: IDeployment = {
        apiVersion: "apps/v1",
        kind: "Deployment",
        metadata: { name: app.metadata.name, labels },
        spec: {
          replicas: replicas ?? app.spec.replicas,
          selector: { matchLabels: labels },
          template: { metadata: { labels }, spec: { containers: [{ name: "app", image: app.spec.image }] } },
        },
      };
      const service = new Service({ metadata: { name: app.metadata.name }, spec: { selector: labels, ports: [{ port: 80 }] } });
      return childrenComplete([deployment, service]);
    },
  );
}

describe("kubernetes-models' built-in kinds", () => {
  test("are desired children as interfaces and as objects, and kinds of owns, observedChildren and Cluster calls", async () => {
    const cluster = new FakeCluster([
      new Deployment({ metadata: { namespace: "shop", name: "web" }, spec: { replicas: 5, selector: {}, template: {} } }),
    ]);
    const out = await new Harness(sidecar().useCluster(cluster)).reconcile(
      { ...apps, metadata: { namespace: "shop", name: "web" }, spec: { image: "nginx", replicas: 2 } },
      { observedChildren: [{ apiVersion: "apps/v1", kind: "Deployment", metadata: { namespace: "shop", name: "web" }, status: { availableReplicas: 3 } } as never] },
    );
    assert.equal(out.error, undefined, out.error?.message);
    assert.deepEqual(out.status, { available: 3 });
    assert.deepEqual(
      out.desiredChildren.map((c) => [c.apiVersion, c.kind, c.metadata.name]),
      [
        ["apps/v1", "Deployment", "web"],
        ["v1", "Service", "web"],
      ],
    );
    const [deployment, service] = out.desiredChildren as [IDeployment, Service];
    assert.equal(deployment.spec?.replicas, 5, "read through cluster.get(Deployment, ...)");
    assert.deepEqual(service.spec?.ports, [{ port: 80 }]);
    // Both are valid against the Kubernetes OpenAPI schema, as kubernetes-models checks it.
    assert.doesNotThrow(() => new Deployment(deployment).validate());
    assert.doesNotThrow(() => new Service(service).validate());
  });

  test("are written through the Cluster as they are", async () => {
    const cluster = new FakeCluster();
    const created = await cluster.create(new Service({ metadata: { namespace: "shop", name: "web" }, spec: { ports: [{ port: 80 }] } }));
    assert.equal(created.metadata?.name, "web");
    const listed = await cluster.list(Service, { namespace: "shop" });
    assert.deepEqual(
      listed.items.map((s) => s.spec?.ports?.[0]?.port),
      [80],
    );
  });
});
