import { create } from "@bufbuild/protobuf";

import { DescribeResponseSchema, ProtocolVersion, type DescribeResponse } from "./gen/polyop/v1alpha1/describe_pb.js";
import type { Registry } from "./registry.js";

// Describe: what the sidecar tells the host about itself, built from its
// registrations and nothing else.

/**
 * The version of the polyop protocol this SDK speaks, answered in Describe:
 * ProtocolVersion.V1ALPHA1 of the generated code.
 */
export const PROTOCOL_VERSION = ProtocolVersion.V1ALPHA1;

/** The SDK's name, answered in Describe (DescribeResponse.sdk_name) for the host's logs. */
export const SDK_NAME = "polyop-typescript";

/** The SDK's version, answered in Describe (DescribeResponse.sdk_version): the version of package.json. */
export const SDK_VERSION = "0.1.0";

/**
 * The answer to Describe of the sidecar name with the registrations of
 * registry; reconcileStream: whether it serves ReconcileStream.
 */
export function description(name: string, registry: Registry, { reconcileStream }: { reconcileStream: boolean }): DescribeResponse {
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
