import { ProtocolVersion } from "./gen/polyop/v1alpha1/describe_pb.js";

// The versions the sidecar answers in Describe, at the bottom of the SDK: the
// description and the tracing's resource both name them.

/**
 * The version of the polyop protocol this SDK speaks, answered in Describe:
 * ProtocolVersion.V1ALPHA1 of the generated code.
 */
export const PROTOCOL_VERSION = ProtocolVersion.V1ALPHA1;

/** The SDK's name, answered in Describe (DescribeResponse.sdk_name) for the host's logs. */
export const SDK_NAME = "polyop-typescript";

/** The SDK's version, answered in Describe (DescribeResponse.sdk_version): the version of package.json. */
export const SDK_VERSION = "0.1.0";
