/**
 * CRDs from TypeScript types: declare a kind's spec and status with TypeBox
 * and get both the static type your reconciler receives and the
 * CustomResourceDefinition the API server serves.
 *
 *     import { Type, type Static } from "@sinclair/typebox";
 *     import { defineKind, Kube } from "@polyop/sidecar/crd";
 *
 *     export const Widget = defineKind({
 *       group: "example.com", version: "v1", kind: "Widget", shortNames: ["wd"],
 *       spec: Type.Object({ size: Type.Integer({ minimum: 1, default: 1 }) }),
 *       status: Kube.Status({ ready: Type.Optional(Type.Boolean()) }),
 *       printerColumns: [{ name: "Size", type: "integer", jsonPath: ".spec.size" }],
 *     });
 *     export type Widget = Static<typeof Widget>;
 *
 *     sidecar.reconciler({ for: Widget }, async (widget) => { widget.spec.size; ... });
 *
 * `polyop-crd dist/types.js -o config/crd/bases` (or crdsOf and writeCRDs)
 * writes one CRD per group and kind, every version defined for it in one
 * file.
 */
import { mkdir, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { Type, type TObject, type TOptional, type TSchema, type TString, type TNever, type TUnsafe } from "@sinclair/typebox";
import { structural, SchemaError, type JSONSchemaProps } from "./crdschema.js";
import type { ObjectMeta } from "./objects.js";
import { toYAML } from "./yaml.js";

export { Kube, type StatusBase, type StatusProperties } from "./crdtypes.js";
export { SchemaError, stringFormats, type JSONSchemaProps, type ValidationRule } from "./crdschema.js";
export { toYAML } from "./yaml.js";

/** A column kubectl get prints (+kubebuilder:printcolumn). */
export interface PrinterColumn {
  name: string;
  type: "integer" | "number" | "string" | "boolean" | "date";
  /** A JSONPath into the object, for example ".status.replicas". */
  jsonPath: string;
  description?: string;
  format?: string;
  /** 0 (the default) shows the column always, above 0 only with -o wide. */
  priority?: number;
}

/** The scale subresource (+kubebuilder:subresource:scale), for kubectl scale and the HorizontalPodAutoscaler. */
export interface ScaleSubresource {
  /** The desired replicas, for example ".spec.replicas". */
  specReplicasPath: string;
  /** The observed replicas, for example ".status.replicas". */
  statusReplicasPath: string;
  /** A label selector in serialized form, for example ".status.selector". */
  labelSelectorPath?: string;
}

/** What defineKind takes: one version of a kind. Kind-wide fields may be given on any of its versions, once or alike. */
export interface KindOptions<Spec extends TSchema, Status extends TSchema> {
  /** The API group, a DNS name with at least one dot, for example "example.com". */
  group: string;
  /** The version, for example "v1" or "v1alpha1". */
  version: string;
  /** The kind, in CamelCase, for example "Widget". */
  kind: string;
  /** The resource name. Defaults to the kind in lower case, made plural by English rules ("Policy" → "policies"). */
  plural?: string;
  /** Defaults to the kind in lower case. */
  singular?: string;
  /** Defaults to the kind followed by "List". */
  listKind?: string;
  /** Defaults to "Namespaced". */
  scope?: "Namespaced" | "Cluster";
  shortNames?: string[];
  /** Groups of resources the kind belongs to, for example ["all"] for kubectl get all. */
  categories?: string[];
  /** The description of the object, the top of the schema. */
  description?: string;
  /** The spec's schema; required in objects, unless wrapped in Type.Optional. */
  spec: Spec;
  /** The status's schema (Kube.Status() has observedGeneration and conditions). Optional in objects. */
  status?: Status;
  /** Constraints on metadata.name and metadata.generateName, the only metadata fields a CRD may constrain. */
  metadata?: { name?: TString; generateName?: TString };
  /**
   * Whether objects are stored in this version (+kubebuilder:storageversion).
   * Exactly one version of a kind is: the one marked true, else the only one
   * not marked false (a kind's only version, for one).
   */
  storage?: boolean;
  /** Whether the API server serves this version. Defaults to true. */
  served?: boolean;
  deprecated?: boolean;
  deprecationWarning?: string;
  printerColumns?: PrinterColumn[];
  /** Fields that kubectl get --field-selector may select on, as JSONPaths, for example ".spec.color". */
  selectableFields?: string[];
  subresources?: {
    /** The status subresource: status is written apart from spec. Defaults to true when a status schema is given. */
    status?: boolean;
    scale?: ScaleSubresource;
  };
}

/** A kind's object schema, its apiVersion and kind, and how to write its CRD: what defineKind returns. */
export type KindSchema<Spec extends TSchema = TSchema, Status extends TSchema = TSchema> = TObject<{
  apiVersion: TString;
  kind: TString;
  metadata: TUnsafe<ObjectMeta>;
  spec: Spec;
  status: TOptional<Status>;
}> &
  DefinedKind;

/** What crdsOf reads of a kind from defineKind, whatever its spec and status. */
export interface DefinedKind {
  readonly apiVersion: string;
  readonly kind: string;
  readonly [kindDefinition]: KindOptions<TSchema, TSchema>;
}

// Symbol.for: a module compiled against another copy of the SDK is found too.
const kindDefinition: unique symbol = Symbol.for("polyop.crd.kind") as never;

/**
 * Declares one version of a kind. The result is a TypeBox schema of the whole
 * object (Static<typeof K> is its type), a TypeMeta (for: K in
 * Sidecar.reconciler) and what crdsOf needs to write the CRD.
 */
export function defineKind<Spec extends TSchema, Status extends TSchema = TNever>(options: KindOptions<Spec, Status>): KindSchema<Spec, Status> {
  const schema = Type.Object(
    {
      apiVersion: Type.String(),
      kind: Type.String(),
      metadata: Type.Unsafe<ObjectMeta>({ type: "object" }),
      spec: options.spec,
      status: Type.Optional(options.status ?? (Type.Never() as unknown as Status)),
    },
    options.description !== undefined ? { description: options.description } : {},
  );
  Object.defineProperties(schema, {
    apiVersion: { value: `${options.group}/${options.version}`, enumerable: false },
    kind: { value: options.kind, enumerable: false },
    [kindDefinition]: { value: options, enumerable: false },
  });
  return schema as unknown as KindSchema<Spec, Status>;
}

/** Whether v is what defineKind returned. */
export function isKind(v: unknown): v is DefinedKind {
  return typeof v === "object" && v !== null && kindDefinition in v;
}

/** apiextensions.k8s.io/v1 CustomResourceDefinition, as crdsOf writes it. */
export interface CustomResourceDefinition {
  apiVersion: "apiextensions.k8s.io/v1";
  kind: "CustomResourceDefinition";
  metadata: { name: string; annotations?: Record<string, string> };
  spec: {
    group: string;
    names: { kind: string; listKind: string; plural: string; singular: string; shortNames?: string[]; categories?: string[] };
    scope: "Namespaced" | "Cluster";
    versions: CustomResourceDefinitionVersion[];
  };
}

export interface CustomResourceDefinitionVersion {
  name: string;
  served: boolean;
  storage: boolean;
  deprecated?: boolean;
  deprecationWarning?: string;
  schema: { openAPIV3Schema: JSONSchemaProps };
  subresources?: { status?: Record<string, never>; scale?: ScaleSubresource };
  additionalPrinterColumns?: PrinterColumn[];
  selectableFields?: { jsonPath: string }[];
}

/** The plural of a kind in lower case, as kubebuilder's (flect's) for the common English endings. */
export function pluralOf(kind: string): string {
  const k = kind.toLowerCase();
  if (/(s|x|z|ch|sh)$/.test(k)) {
    return k + "es";
  }
  if (/[^aeiou]y$/.test(k)) {
    return k.slice(0, -1) + "ies";
  }
  return k + "s";
}

const dns1123Subdomain = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
const dns1035Label = /^[a-z]([-a-z0-9]*[a-z0-9])?$/;

/** An error in a kind's definition: it names the kind and version, then the field. */
export class KindError extends Error {
  constructor(what: string, message: string) {
    super(`polyop: ${what}: ${message}`);
    this.name = "KindError";
  }
}

/**
 * The CRDs of kinds, one per group and kind with every version defined for
 * it, sorted by name. Throws KindError naming the kind, the version and the
 * field for what the API server would refuse.
 */
export function crdsOf(kinds: Iterable<DefinedKind>): CustomResourceDefinition[] {
  const byGroupKind = new Map<string, KindOptions<TSchema, TSchema>[]>();
  for (const k of new Set(kinds)) {
    const o = k[kindDefinition];
    const gk = `${o.kind}.${o.group}`;
    byGroupKind.set(gk, [...(byGroupKind.get(gk) ?? []), o]);
  }
  return [...byGroupKind.values()].map(crdOf).sort((a, b) => a.metadata.name.localeCompare(b.metadata.name));
}

function crdOf(versions: KindOptions<TSchema, TSchema>[]): CustomResourceDefinition {
  const first = versions[0]!;
  const what = `${first.kind}.${first.group}`;
  if (!dns1123Subdomain.test(first.group) || !first.group.includes(".")) {
    throw new KindError(what, `the group ${JSON.stringify(first.group)} must be a lower-case DNS name with at least one dot, for example "example.com"`);
  }
  if (!/^[A-Z][A-Za-z0-9]*$/.test(first.kind)) {
    throw new KindError(what, `the kind ${JSON.stringify(first.kind)} must be CamelCase letters and digits, starting with a capital`);
  }
  // Kind-wide fields: given once, or alike on every version that gives them.
  const shared = <K extends keyof KindOptions<TSchema, TSchema>>(field: K, fallback: NonNullable<KindOptions<TSchema, TSchema>[K]> | undefined) => {
    const given = versions.filter((v) => v[field] !== undefined);
    for (const v of given) {
      if (JSON.stringify(v[field]) !== JSON.stringify(given[0]![field])) {
        throw new KindError(what, `${field} differs between versions ${given[0]!.version} and ${v.version}: give it once, or alike`);
      }
    }
    return given[0]?.[field] ?? fallback;
  };
  const plural = shared("plural", pluralOf(first.kind))!;
  const singular = shared("singular", first.kind.toLowerCase())!;
  for (const [name, value] of [["plural", plural], ["singular", singular]]) {
    if (!dns1035Label.test(value!)) {
      throw new KindError(what, `the ${name} ${JSON.stringify(value)} must be lower-case letters, digits and '-'`);
    }
  }
  const names: CustomResourceDefinition["spec"]["names"] = {
    kind: first.kind,
    listKind: shared("listKind", `${first.kind}List`)!,
    plural,
    singular,
  };
  const shortNames = shared("shortNames", undefined);
  const categories = shared("categories", undefined);
  if (shortNames?.length) {
    names.shortNames = [...shortNames];
  }
  if (categories?.length) {
    names.categories = [...categories];
  }
  const scope = shared("scope", "Namespaced")!;
  const seen = new Set<string>();
  for (const v of versions) {
    if (!dns1035Label.test(v.version)) {
      throw new KindError(what, `the version ${JSON.stringify(v.version)} must be lower-case letters and digits, for example "v1" or "v1alpha1"`);
    }
    if (seen.has(v.version)) {
      throw new KindError(what, `version ${v.version} is defined twice`);
    }
    seen.add(v.version);
  }
  // The version marked storage: true, else the only one not marked storage: false.
  const marked = versions.filter((v) => v.storage === true);
  const storage = marked.length > 0 ? marked : versions.filter((v) => v.storage === undefined);
  if (storage.length !== 1) {
    throw new KindError(
      what,
      marked.length > 1
        ? `versions ${marked.map((v) => v.version).join(" and ")} are all marked storage: true; exactly one is stored`
        : `none of the versions ${versions.map((v) => v.version).join(", ")} is the storage version: set storage: true on one`,
    );
  }
  return {
    apiVersion: "apiextensions.k8s.io/v1",
    kind: "CustomResourceDefinition",
    metadata: { name: `${plural}.${first.group}` },
    spec: {
      group: first.group,
      names,
      scope,
      versions: [...versions].sort((a, b) => compareVersions(a.version, b.version)).map((v) => versionOf(v, v === storage[0])),
    },
  };
}

/** Kubernetes' version priority: GA before beta before alpha, higher numbers first (as kubectl lists them). */
function compareVersions(a: string, b: string): number {
  const rank = (v: string) => {
    const m = /^v(\d+)(?:(alpha|beta)(\d+))?$/.exec(v);
    return m ? [0, m[2] === undefined ? 3 : m[2] === "beta" ? 2 : 1, Number(m[1]), Number(m[3] ?? 0)] : [1, 0, 0, 0];
  };
  const [ra, rb] = [rank(a), rank(b)];
  for (let i = 0; i < 4; i++) {
    if (ra[i] !== rb[i]) {
      return i === 0 ? ra[i]! - rb[i]! : rb[i]! - ra[i]!;
    }
  }
  return a.localeCompare(b);
}

function versionOf(v: KindOptions<TSchema, TSchema>, storage: boolean): CustomResourceDefinitionVersion {
  const what = `${v.kind}.${v.group}/${v.version}`;
  let root: JSONSchemaProps;
  try {
    root = rootSchema(v);
  } catch (err) {
    if (err instanceof SchemaError) {
      throw new KindError(what, `${err.message}`);
    }
    throw err;
  }
  const out: CustomResourceDefinitionVersion = { name: v.version, served: v.served ?? true, storage, schema: { openAPIV3Schema: root } };
  if (v.deprecated) {
    out.deprecated = true;
  }
  if (v.deprecationWarning !== undefined) {
    out.deprecationWarning = v.deprecationWarning;
  }
  const subresources: CustomResourceDefinitionVersion["subresources"] = {};
  if (v.subresources?.status ?? v.status !== undefined) {
    if (v.status === undefined) {
      throw new KindError(what, "subresources.status is set but there is no status schema");
    }
    subresources.status = {};
  }
  if (v.subresources?.scale) {
    const scale = v.subresources.scale;
    for (const [name, path, under] of [
      ["specReplicasPath", scale.specReplicasPath, "spec"],
      ["statusReplicasPath", scale.statusReplicasPath, "status"],
      ["labelSelectorPath", scale.labelSelectorPath, "status"],
    ] as const) {
      if (path === undefined) {
        continue;
      }
      const field = fieldAt(root, path);
      if (!path.startsWith(`.${under}.`) || !field) {
        throw new KindError(what, `subresources.scale.${name} ${JSON.stringify(path)} must name a field of .${under} in the schema`);
      }
      if (name !== "labelSelectorPath" && field.type !== "integer") {
        throw new KindError(what, `subresources.scale.${name} ${JSON.stringify(path)} must name an integer field, not ${field.type ?? "an untyped one"}`);
      }
      if (name === "labelSelectorPath" && field.type !== "string") {
        throw new KindError(what, `subresources.scale.labelSelectorPath ${JSON.stringify(path)} must name a string field (a serialized label selector)`);
      }
    }
    subresources.scale = { ...scale };
  }
  if (Object.keys(subresources).length > 0) {
    out.subresources = subresources;
  }
  if (v.printerColumns?.length) {
    for (const c of v.printerColumns) {
      if (!["integer", "number", "string", "boolean", "date"].includes(c.type)) {
        throw new KindError(what, `printer column ${JSON.stringify(c.name)} has type ${JSON.stringify(c.type)}: use integer, number, string, boolean or date`);
      }
      if (!c.jsonPath.startsWith(".")) {
        throw new KindError(what, `printer column ${JSON.stringify(c.name)}: the jsonPath ${JSON.stringify(c.jsonPath)} must start with "."`);
      }
    }
    out.additionalPrinterColumns = v.printerColumns.map((c) => ({ ...c }));
  }
  if (v.selectableFields?.length) {
    for (const path of v.selectableFields) {
      const field = fieldAt(root, path);
      if (!field || !["string", "integer", "boolean"].includes(field.type ?? "")) {
        throw new KindError(what, `the selectable field ${JSON.stringify(path)} must name a string, integer or boolean field of the schema`);
      }
    }
    out.selectableFields = v.selectableFields.map((jsonPath) => ({ jsonPath }));
  }
  return out;
}

/** The schema of the field at a simple JSONPath (".spec.replicas"), if any. */
function fieldAt(root: JSONSchemaProps, path: string): JSONSchemaProps | undefined {
  let node: JSONSchemaProps | undefined = root;
  for (const part of path.replace(/^\./, "").split(".")) {
    node = node?.properties?.[part];
  }
  return node;
}

const apiVersionDescription =
  "APIVersion defines the versioned schema of this representation of an object.\nServers should convert recognized schemas to the latest internal value, and\nmay reject unrecognized values.\nMore info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#resources";
const kindDescription =
  "Kind is a string value representing the REST resource this object represents.\nServers may infer this from the endpoint the client submits requests to.\nCannot be updated.\nIn CamelCase.\nMore info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#types-kinds";

/** The openAPIV3Schema of one version: apiVersion, kind and metadata as every object has them, then spec and status. */
function rootSchema(v: KindOptions<TSchema, TSchema>): JSONSchemaProps {
  const metadata: JSONSchemaProps = { type: "object" };
  for (const [name, schema] of Object.entries(v.metadata ?? {})) {
    if (name !== "name" && name !== "generateName") {
      throw new SchemaError(`metadata.${name}`, "a CRD may constrain only metadata.name and metadata.generateName");
    }
    const field = structural(schema, `metadata.${name}`);
    if (field.type !== "string") {
      throw new SchemaError(`metadata.${name}`, "must be a Type.String()");
    }
    for (const key of Object.keys(field)) {
      if (!["type", "pattern", "minLength", "maxLength", "format", "description", "x-kubernetes-validations", "enum"].includes(key)) {
        throw new SchemaError(`metadata.${name}`, `a CRD may only constrain its value (pattern, length, format, enum), not set ${key}`);
      }
    }
    metadata.properties = { ...metadata.properties, [name]: field };
  }
  const spec = structural(v.spec, "spec");
  const properties: Record<string, JSONSchemaProps> = {
    apiVersion: { type: "string", description: apiVersionDescription },
    kind: { type: "string", description: kindDescription },
    metadata,
    spec,
  };
  if (v.status !== undefined) {
    properties.status = structural(v.status, "status");
  }
  const root: JSONSchemaProps = { type: "object", properties };
  if (v.description !== undefined) {
    root.description = v.description;
  }
  // Type.Optional(spec) leaves spec out of required; anything else keeps it there.
  if (!(Symbol.for("TypeBox.Optional") in v.spec)) {
    root.required = ["spec"];
  }
  return root;
}

/** The file name controller-gen gives a CRD: <group>_<plural>.yaml. */
export function fileNameOf(crd: CustomResourceDefinition): string {
  return `${crd.spec.group}_${crd.spec.names.plural}.yaml`;
}

/** Writes the CRDs of kinds into dir, one YAML file each (created if needed). Returns the paths written. */
export async function writeCRDs(kinds: Iterable<DefinedKind>, dir: string): Promise<string[]> {
  const crds = crdsOf(kinds);
  await mkdir(dir, { recursive: true });
  const paths: string[] = [];
  for (const crd of crds) {
    const path = join(dir, fileNameOf(crd));
    await writeFile(path, "---\n" + toYAML(crd));
    paths.push(path);
  }
  return paths;
}
