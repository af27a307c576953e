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
 * An object you build, to apply as a desired child or to write through the
 * Cluster: its kind, and metadata whose every field may be left out (a
 * desired child's namespace defaults to its owner's). The typed built-in
 * kinds of kubernetes-models are ones, as interfaces (IDeployment) and as
 * objects (new Deployment({...})), and so is every KubeResource.
 */
export interface Manifest extends TypeMeta {
  metadata?: ObjectMeta;
}

/**
 * The metadata of an object the host sends a handler: its name and
 * namespace are always strings. The namespace of a cluster-scoped object is
 * "", and so is the name a defaulter sees on a create with generateName
 * (the API server names the object after the mutating webhooks).
 */
export interface ReceivedMeta extends ObjectMeta {
  name: string;
  namespace: string;
}

/**
 * An object as the host sends it to a handler (the reconciled object, an
 * admission object, an observed child): T with metadata.name and
 * metadata.namespace typed as present, so that strict code uses them as
 * label values or keys without `!`.
 */
export type Received<T> = T & { metadata: ReceivedMeta };

/**
 * Makes obj a Received one, in place: a name or namespace the JSON left out
 * becomes "". Returns what it filled in, to take out again before obj is sent
 * back (see unreceive).
 */
export function receive<T extends object>(obj: T): { obj: Received<T>; filled: Array<"name" | "namespace"> } {
  const holder = obj as { metadata?: Partial<ReceivedMeta> | null };
  if (typeof holder.metadata !== "object" || holder.metadata === null) {
    holder.metadata = {};
  }
  const meta = holder.metadata;
  const filled: Array<"name" | "namespace"> = [];
  for (const field of ["name", "namespace"] as const) {
    if (typeof meta[field] !== "string") {
      meta[field] = "";
      filled.push(field);
    }
  }
  return { obj: obj as Received<T>, filled };
}

/** Takes out of obj's metadata the fields receive filled in that are still "". */
export function unreceive(obj: unknown, filled: ReadonlyArray<"name" | "namespace">): void {
  const meta = (obj as { metadata?: Record<string, unknown> } | null)?.metadata;
  for (const field of filled) {
    if (meta?.[field] === "") {
      delete meta[field];
    }
  }
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
export interface TypedKind<T extends Manifest = KubeResource> extends TypeMeta {
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
export function keyOf(obj: Manifest): ObjectKey {
  return { namespace: obj.metadata?.namespace ?? "", name: obj.metadata?.name ?? "" };
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
