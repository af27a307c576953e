import { isKind, type DefinedKind } from "./crd.js";
import { apiVersionOf, gvkOf, type GroupVersionKind, type KubeResource, type Manifest, type TypedKind, type TypeMeta } from "./objects.js";

// How the SDK is told a kind: every registration, and the Cluster's calls,
// take one of the three forms of KindRef and resolve it here.

/**
 * A kind, in any of the three forms every registration takes:
 *
 * - a typed model: what defineKind ("@polyop/sidecar/crd") returns, or a
 *   kubernetes-models class such as Deployment — both carry the objects'
 *   static type, which the handler then receives;
 * - kind info: { apiVersion: "apps/v1", kind: "Deployment" }, or
 *   { group: "apps", version: "v1", kind: "Deployment" };
 * - a string: "apps/v1/Deployment" ("v1/ConfigMap" for the core group), or
 *   "apps/v1, Kind=Deployment" as Go's schema.GroupVersionKind prints it.
 */
export type KindRef = TypeMeta | GroupVersionKind | string;

/** A class of kubernetes-models (Deployment, ConfigMap, …): its statics are the kind, its instances the objects. */
export type ModelClass<T extends Manifest = Manifest> = TypeMeta & (abstract new (...args: never[]) => T);

/** A kind that carries its objects' static type: a defineKind result, or a kubernetes-models class. */
export type TypedKindRef = TypedKind | ModelClass;

/**
 * The static type of the objects of a kind: a defineKind model's; a
 * kubernetes-models class's instance fields (not its methods: objects cross
 * the wire as JSON, not as instances of the class); else KubeResource.
 */
export type ObjectOf<K> = K extends TypedKind<infer T> ? T : K extends abstract new (...args: never[]) => infer I ? DataOf<I> : KubeResource;

/** The data of an object type: its fields that are not functions. */
export type DataOf<I> = { [P in keyof I as I[P] extends (...args: never[]) => unknown ? never : P]: I[P] };

/** The key of a kind in the registry's maps: "group/version/kind". */
export const kindKey = (gvk: GroupVersionKind): string => `${gvk.group}/${gvk.version}/${gvk.kind}`;

/** Parses "group/version/Kind", "version/Kind" and "group/version, Kind=Kind"; undefined for anything else. */
function parseKindString(s: string): GroupVersionKind | undefined {
  const go = /^(?:(?<group>[^/,\s]+)\/)?(?<version>[^/,\s]+), Kind=(?<kind>[^/,\s]+)$/.exec(s.trim());
  if (go?.groups) {
    return { group: go.groups.group ?? "", version: go.groups.version!, kind: go.groups.kind! };
  }
  const parts = s.trim().split("/");
  if (parts.length === 2) {
    parts.unshift("");
  }
  if (parts.length !== 3 || !parts[1] || !parts[2] || parts.some((p) => /[\s,=]/.test(p))) {
    return undefined;
  }
  return { group: parts[0]!, version: parts[1], kind: parts[2] };
}

/** Checks a kind given in any form of KindRef and splits it; where names the caller in the error. */
export function kindOf(ref: KindRef | undefined, where: string): GroupVersionKind {
  if (typeof ref === "string") {
    const gvk = parseKindString(ref);
    if (!gvk) {
      throw new Error(`${where}: the kind ${JSON.stringify(ref)} is neither "group/version/Kind", "version/Kind" nor "group/version, Kind=Kind"`);
    }
    return gvk;
  }
  if ((typeof ref === "object" || typeof ref === "function") && ref !== null) {
    if ("apiVersion" in ref) {
      if (!ref.apiVersion || !ref.kind) {
        throw new Error(`${where}: a kind needs an apiVersion and a kind, got ${describe(ref)}`);
      }
      return gvkOf(ref);
    }
    if ("version" in ref && ref.version && ref.kind) {
      return { group: ref.group ?? "", version: ref.version, kind: ref.kind };
    }
  }
  throw new Error(`${where}: a kind is a defineKind model, { apiVersion, kind }, { group, version, kind } or "group/version/Kind", got ${describe(ref)}`);
}

/** A kind in any form of KindRef as apiVersion and kind. */
export function typeMetaOf(ref: KindRef, where: string): TypeMeta {
  const gvk = kindOf(ref, where);
  return { apiVersion: apiVersionOf(gvk), kind: gvk.kind };
}

/** The defineKind model a kind was given as, if it was one: admission objects are checked against it. */
export function modelOf(ref: KindRef | undefined): DefinedKind | undefined {
  return isKind(ref) ? ref : undefined;
}

function describe(v: unknown): string {
  return typeof v === "function" ? `a function ${v.name || "(anonymous)"}` : JSON.stringify(v) ?? String(v);
}
