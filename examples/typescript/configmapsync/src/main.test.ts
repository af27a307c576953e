// The example's real process, served on a unix socket and called over gRPC by
// Connect's client, with its Cluster service an in-memory cluster served on
// another socket.
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { once } from "node:events";
import { mkdtemp, rm } from "node:fs/promises";
import { connect } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";

import { createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { PROTOCOL_VERSION } from "@polyop/sidecar";
import { FakeCluster, serveCluster } from "@polyop/sidecar/testing";
import { Health, HealthCheckResponse_ServingStatus } from "@polyop/sidecar/gen/grpc/health/v1/health_pb";
import { SidecarService } from "@polyop/sidecar/gen/polyop/v1alpha1/sidecar_pb";

import { newSidecar } from "./sidecar.js";
import { configMaps, configMapSyncs, copiesIndex, type ConfigMap, type ConfigMapSync } from "./types.js";

test("the sidecar process serves Describe, Default and Reconcile, and stops on SIGTERM", async (t) => {
  const dir = await mkdtemp(join(tmpdir(), "po-"));
  t.after(() => rm(dir, { recursive: true, force: true }));
  const cluster = new FakeCluster([{ ...configMaps, metadata: { namespace: "ops", name: "ca-bundle" }, data: { "ca.crt": "CERT" } } as ConfigMap]).indexAs(newSidecar());
  const clusterService = await serveCluster(cluster, `unix://${join(dir, "cluster.sock")}`);
  t.after(() => clusterService.stop());

  const socket = join(dir, "sidecar.sock");
  const child = spawn(process.execPath, [
    fileURLToPath(new URL("./main.js", import.meta.url)),
    "--address",
    `unix://${socket}`,
    "--cluster-address",
    `unix://${join(dir, "cluster.sock")}`,
  ]);
  let output = "";
  child.stderr.on("data", (d: Buffer) => (output += d.toString()));
  t.after(() => child.kill("SIGKILL"));

  const transport = createGrpcTransport({ baseUrl: "http://localhost", nodeOptions: { createConnection: () => connect(socket) } });
  const health = createClient(Health, transport);
  const sidecar = createClient(SidecarService, transport);
  for (let i = 0; ; i++) {
    const ok = await health.check({ service: "" }).then((r) => r.status === HealthCheckResponse_ServingStatus.SERVING, () => false);
    if (ok) {
      break;
    }
    assert.ok(i < 100, `the sidecar did not become ready:\n${output}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }

  const description = await sidecar.describe({ protocolVersion: PROTOCOL_VERSION });
  assert.equal(description.name, "configmapsync-operator");
  assert.deepEqual([description.protocolVersion, description.sdkName], [PROTOCOL_VERSION, "polyop-typescript"]);
  const controller = description.controllers[0]!;
  assert.equal(controller.finalizer, "configmapsync.examples.polyop.dev/cleanup");
  assert.deepEqual(controller.watches[0]?.mapping, { case: "fieldPath", value: "spec.source" });
  assert.deepEqual(
    description.indexes.map((ix) => [ix.kind?.kind, ix.name, ix.value]),
    [["ConfigMap", copiesIndex.name, { case: "fieldPath", value: copiesIndex.fieldPath }]],
  );
  assert.deepEqual([description.webhooks[0]?.default, description.webhooks[0]?.validate], [true, true]);

  const obj: ConfigMapSync = { ...configMapSyncs, metadata: { namespace: "ops", name: "ca", uid: "u1", generation: 1 }, spec: { source: "ca-bundle", targetNamespaces: ["team-a"] } };
  const defaulted = await sidecar.default({
    request: {
      kind: { group: "examples.polyop.dev", version: "v1", kind: "ConfigMapSync" },
      key: { namespace: "ops", name: "ca" },
      operation: 1,
      object: new TextEncoder().encode(JSON.stringify(obj)),
    },
  });
  assert.equal(JSON.parse(new TextDecoder().decode(defaulted.object)).spec.targetName, "ca-bundle");

  const resp = await sidecar.reconcile({
    controller: "configmapsync",
    kind: { group: "examples.polyop.dev", version: "v1", kind: "ConfigMapSync" },
    key: { namespace: "ops", name: "ca" },
    object: new TextEncoder().encode(JSON.stringify(obj)),
  });
  assert.equal(resp.error, undefined, resp.error?.message);
  assert.deepEqual(JSON.parse(new TextDecoder().decode(resp.status)).syncedNamespaces, ["team-a"]);
  assert.deepEqual((await cluster.get<ConfigMap>(configMaps, { namespace: "team-a", name: "ca-bundle" })).data, { "ca.crt": "CERT" });

  child.kill("SIGTERM");
  const [code] = await once(child, "exit");
  assert.equal(code, 0, output);
  assert.match(output, /"msg":"Stopped"/);
});
