import type { CallContext, MaybePromise } from "./context.js";
import type { KubeResource } from "./objects.js";

/** Converts obj to desiredApiVersion and returns it. */
export type Converter = (obj: KubeResource, desiredApiVersion: string, ctx: CallContext) => MaybePromise<KubeResource>;
