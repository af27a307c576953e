/**
 * The shapes of Kubernetes objects as the API server's JSON has them. Objects
 * cross the wire as that JSON and are decoded with JSON.parse: declare your
 * kinds as interfaces over these and you get typed access with no codegen.
 */

/** An object's apiVersion and kind, for example {apiVersion: "apps/v1", kind: "Deployment"}. */
export interface TypeMeta {
  apiVersion: string;
  kind: string;
}

/** A kind split into its parts, as the polyop protocol carries it. The core group is "". */
export interface GroupVersionKind {
  group: string;
  version: string;
  kind: string;
}

/** One object's namespace (absent or "" for cluster-scoped kinds) and name. */
export interface ObjectKey {
  namespace?: string;
  name: string;
}

/** metav1.OwnerReference. */
export interface OwnerReference {
  apiVersion: string;
  kind: string;
  name: string;
  uid: string;
  controller?: boolean;
  blockOwnerDeletion?: boolean;
}

/** metav1.ObjectMeta, with the fields a controller commonly reads or sets. */
export interface ObjectMeta {
  name?: string;
  generateName?: string;
  namespace?: string;
  uid?: string;
  resourceVersion?: string;
  generation?: number;
  creationTimestamp?: string;
  deletionTimestamp?: string;
  deletionGracePeriodSeconds?: number;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
  ownerReferences?: OwnerReference[];
  finalizers?: string[];
  managedFields?: unknown[];
}

/** Any Kubernetes object: a ConfigMap, a Secret, a custom resource. */
export interface KubeResource extends TypeMeta {
  metadata: ObjectMeta;
}

/**
 * An object with a spec and a status, as most kinds have, custom resources
 * above all:
 *
 *     type Widget = KubeObject<{ size: number }, { ready: boolean }>;
 *
 * The spec is typed as present: the CRD's schema makes it so for every field
 * it requires. The status is absent until a controller first writes one.
 */
export interface KubeObject<Spec = Record<string, unknown>, Status = Record<string, unknown>> extends KubeResource {
  spec: Spec;
  status?: Status;
}

/**
 * A kind that carries its objects' static type, as defineKind's schemas do
 * (TypeBox's phantom static property): Sidecar.reconciler({ for: K }, fn)
 * gives fn that type.
 */
export interface TypedKind<T extends KubeResource = KubeResource> extends TypeMeta {
  readonly static: T;
}

/** The kind of an apiVersion and kind: "apps/v1" → group "apps", version "v1"; "v1" → the core group. */
export function gvkOf(type: TypeMeta): GroupVersionKind {
  const slash = type.apiVersion.indexOf("/");
  return slash < 0
    ? { group: "", version: type.apiVersion, kind: type.kind }
    : { group: type.apiVersion.slice(0, slash), version: type.apiVersion.slice(slash + 1), kind: type.kind };
}

/** The apiVersion of a kind: "apps/v1", or "v1" for the core group. */
export function apiVersionOf(gvk: { group: string; version: string }): string {
  return gvk.group === "" ? gvk.version : `${gvk.group}/${gvk.version}`;
}

/** The key of an object: its namespace and name. */
export function keyOf(obj: KubeResource): ObjectKey {
  return { namespace: obj.metadata.namespace ?? "", name: obj.metadata.name ?? "" };
}

/** "namespace/name", or "name" for a cluster-scoped object, as Kubernetes prints keys. */
export function formatKey(key: ObjectKey): string {
  return key.namespace ? `${key.namespace}/${key.name}` : key.name;
}

const encoder = new TextEncoder();

/**
 * Decodes an object from the API server's JSON bytes. JSON numbers are
 * JavaScript numbers: integers above 2^53 lose precision, as everywhere in
 * JavaScript; Kubernetes keeps such values (resourceVersion, for one) in
 * strings.
 */
export function decodeJSON<T>(data: Uint8Array): T {
  // A Buffer over the same memory (no copy) decodes UTF-8 a little faster than
  // a TextDecoder; like one, it skips a byte order mark.
  const bom = data[0] === 0xef && data[1] === 0xbb && data[2] === 0xbf ? 3 : 0;
  return JSON.parse(Buffer.from(data.buffer, data.byteOffset + bom, data.byteLength - bom).toString("utf8")) as T;
}

/** Encodes a value as JSON bytes. */
export function encodeJSON(value: unknown): Uint8Array {
  return encoder.encode(JSON.stringify(value));
}
