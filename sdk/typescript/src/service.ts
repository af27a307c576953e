import type { ConvertRequest, ConvertResponse, DefaultRequest, DefaultResponse, ValidateRequest, ValidateResponse } from "./gen/polyop/v1alpha1/admission_pb.js";
import type { DescribeRequest, DescribeResponse } from "./gen/polyop/v1alpha1/describe_pb.js";
import type { FinalizeRequest, FinalizeResponse, ReconcileRequest, ReconcileResponse } from "./gen/polyop/v1alpha1/reconcile_pb.js";
import { defaultObject, validate } from "./dispatch-admission.js";
import { convert } from "./dispatch-conversion.js";
import { finalize, reconcile } from "./dispatch-reconcile.js";
import type { Call, SidecarEnv } from "./dispatch.js";

// The implementation of polyop.v1alpha1.SidecarService, protocol-neutral:
// each method takes a request message and its Call and answers (or throws a
// ConnectError, whose code is gRPC's). serve.ts puts it on grpc-js; the test
// harness calls it directly.

/** The methods of SidecarService, as the SDK implements them. */
export interface SidecarServiceImpl {
  describe(req: DescribeRequest): DescribeResponse;
  reconcile(req: ReconcileRequest, call: Call): Promise<ReconcileResponse>;
  finalize(req: FinalizeRequest, call: Call): Promise<FinalizeResponse>;
  default(req: DefaultRequest, call: Call): Promise<DefaultResponse>;
  validate(req: ValidateRequest, call: Call): Promise<ValidateResponse>;
  convert(req: ConvertRequest, call: Call): Promise<ConvertResponse>;
}

/** SidecarService over env's registrations; describe answers Describe. */
export function sidecarService(env: SidecarEnv, describe: (req: DescribeRequest) => DescribeResponse): SidecarServiceImpl {
  return {
    describe,
    reconcile: (req, call) => reconcile(env, req, call),
    finalize: (req, call) => finalize(env, req, call),
    default: (req, call) => defaultObject(env, req, call),
    validate: (req, call) => validate(env, req, call),
    convert: (req, call) => convert(env, req, call),
  };
}
