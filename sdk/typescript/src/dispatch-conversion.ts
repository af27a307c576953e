import { create } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";

import { SpanStatusCode } from "@opentelemetry/api";

import { callContext, decode, type Call, type SidecarEnv } from "./dispatch.js";
import { ConvertResponseSchema, type ConvertRequest, type ConvertResponse } from "./gen/polyop/v1alpha1/admission_pb.js";
import { encodeJSON, gvkOf, type KubeResource } from "./objects.js";
import { inServerSpan, type ServerSpan } from "./tracing.js";

// Convert: CRD conversion webhooks, one converter per kind.

/**
 * Answers a ConvertRequest: each object not yet at the desired version
 * through the converter of its kind. A converter that throws fails the whole
 * request with its message; a kind without a converter is NOT_FOUND. It runs
 * in a server span of the host's trace.
 */
export function convert(env: SidecarEnv, req: ConvertRequest, call: Call): Promise<ConvertResponse> {
  const attributes = { "polyop.conversion.desired_api_version": req.desiredApiVersion, "polyop.conversion.objects": req.objects.length };
  return inServerSpan(call, "Convert", attributes, (server) => convertIn(env, req, call.signal, server), (resp, span) => {
    if (resp.error) {
      span.setStatus({ code: SpanStatusCode.ERROR, message: resp.error });
      return "error";
    }
    return "success";
  });
}

async function convertIn(env: SidecarEnv, req: ConvertRequest, signal: AbortSignal, server: ServerSpan): Promise<ConvertResponse> {
  if (env.registry.conversions.size === 0) {
    throw new ConnectError(`sidecar ${JSON.stringify(env.name)} registers no converter: it serves no Convert`, Code.Unimplemented);
  }
  const log = env.log.child({ conversion: req.desiredApiVersion, uid: req.uid, ...server.logFields });
  const ctx = callContext(env, signal, log, server.span, server.context);
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
