import { create } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";

import { callContext, decode, type CallContext, type MaybePromise, type SidecarEnv } from "./context.js";
import { ConvertResponseSchema, type ConvertRequest, type ConvertResponse } from "./gen/polyop/v1alpha1/admission_pb.js";
import { encodeJSON, gvkOf, type KubeResource } from "./objects.js";

// Convert: CRD conversion webhooks, one converter per kind.

/** Converts obj to desiredApiVersion and returns it. */
export type Converter = (obj: KubeResource, desiredApiVersion: string, ctx: CallContext) => MaybePromise<KubeResource>;

/**
 * Answers a ConvertRequest: each object not yet at the desired version
 * through the converter of its kind. A converter that throws fails the whole
 * request with its message; a kind without a converter is NOT_FOUND.
 */
export async function convert(env: SidecarEnv, req: ConvertRequest, signal: AbortSignal): Promise<ConvertResponse> {
  if (env.registry.conversions.size === 0) {
    throw new ConnectError(`sidecar ${JSON.stringify(env.name)} registers no converter: it serves no Convert`, Code.Unimplemented);
  }
  const log = env.log.child({ conversion: req.desiredApiVersion, uid: req.uid });
  const ctx = callContext(env, signal, log);
  const objects = req.objects.map((data) => {
    const obj = decode<KubeResource>(data, "an object");
    const { group, kind } = gvkOf({ apiVersion: obj.apiVersion ?? "", kind: obj.kind ?? "" });
    const conversion = env.registry.conversions.get(`${group}/${kind}`);
    if (!conversion) {
      throw new ConnectError(`sidecar ${JSON.stringify(env.name)} has no converter for ${kind}${group ? `.${group}` : ""}`, Code.NotFound);
    }
    return { data, obj, conversion };
  });
  try {
    const converted = [];
    for (const { data, obj, conversion } of objects) {
      if (obj.apiVersion === req.desiredApiVersion) {
        converted.push(data);
        continue;
      }
      const out = await conversion.convert(obj, req.desiredApiVersion, ctx);
      if (out.apiVersion !== req.desiredApiVersion) {
        throw new Error(`converting ${obj.kind} ${obj.metadata.name} to ${req.desiredApiVersion} returned apiVersion ${out.apiVersion}`);
      }
      converted.push(encodeJSON(out));
    }
    return create(ConvertResponseSchema, { objects: converted });
  } catch (err) {
    log.error("Conversion failed", { error: err });
    return create(ConvertResponseSchema, { error: err instanceof Error ? err.message : String(err) });
  }
}
