import { create } from "@bufbuild/protobuf";

import { DescribeResponseSchema, type DescribeResponse } from "./gen/polyop/v1alpha1/describe_pb.js";
import type { Registry } from "./registry.js";
import { PROTOCOL_VERSION, SDK_NAME, SDK_VERSION } from "./version.js";

// Describe: what the sidecar tells the host about itself, built from its
// registrations and nothing else.

export { PROTOCOL_VERSION, SDK_NAME, SDK_VERSION } from "./version.js";

/**
 * The answer to Describe of the sidecar name with the registrations of
 * registry; reconcileStream: whether it serves ReconcileStream. Throws what
 * the registrations lack as a whole (Registry.check).
 */
export function description(name: string, registry: Registry, { reconcileStream }: { reconcileStream: boolean }): DescribeResponse {
  registry.check();
  return create(DescribeResponseSchema, {
    protocolVersion: PROTOCOL_VERSION,
    name,
    controllers: [...registry.controllers.values()].map((c) => c.desc),
    webhooks: [...registry.webhooks.values()].map((w) => w.desc),
    conversions: [...registry.conversions.values()].map(({ desc }) => ({
      kind: { group: desc.group, kind: desc.kind },
      versions: desc.versions,
    })),
    indexes: [...registry.indexes.values()],
    cachedKinds: [...registry.cachedKinds.values()],
    sdkName: SDK_NAME,
    sdkVersion: SDK_VERSION,
    reconcileStream,
  });
}
