import type { KindRef } from "./kinds.js";
import type { KubeResource, TypeMeta } from "./objects.js";

// Declared cache indexes and cached kinds (DescribeResponse.indexes and
// cached_kinds), and the field paths the host evaluates, for FakeCluster.

/**
 * The index the host keeps on every kind a controller owns: the UID of an
 * object's controller owner. `cluster.list(kind, { namespace, fieldSelector:
 * `${OWNER_UID_INDEX}=${owner.metadata.uid}` })` lists an owner's children from
 * the host's cache.
 */
export const OWNER_UID_INDEX = ".metadata.controllerUID";

/**
 * The kind an index or cached kind is declared on: `for`, in any form of
 * KindRef (a defineKind model, kind info, "group/version/Kind"), or the kind
 * info spread into the options ({ ...configMaps, name, fieldPath }).
 */
export type DeclaredKind = { for: KindRef; apiVersion?: never; kind?: never } | (TypeMeta & { for?: never });

/**
 * A cache index the host keeps on a kind, the declarative form of
 * controller-runtime's IndexField: `cluster.list(kind, { fieldSelector:
 * `${name}=${value}` })` is then answered from the host's cache. The values
 * are those at a `fieldPath` (".spec.nodeName",
 * ".metadata.ownerReferences[?(@.controller==true)].name") or the string, or
 * list of strings, a `cel` expression over `object` returns. The host compiles
 * both at start and stops, naming the index, if one does not compile.
 */
export type IndexOptions = DeclaredKind & { name: string } & (
    | { fieldPath: string; cel?: never; path?: never }
    | { cel: string; fieldPath?: never; path?: never }
    | {
        /** @deprecated Use fieldPath, the protocol's name. */
        path: string;
        fieldPath?: never;
        cel?: never;
      }
  );

/** An index as the sidecar declared it: its kind as kind info, its values by fieldPath or cel. */
export type DeclaredIndex = TypeMeta & { name: string } & ({ fieldPath: string; cel?: never } | { cel: string; fieldPath?: never });

/**
 * A kind the host caches for reads, with no controller: reads of it through
 * ctx.cluster come from the host's cache. namespaces (every namespace the host
 * watches by default), labelSelector and fieldSelector select what is cached.
 */
export type CachedKindOptions = DeclaredKind & {
  namespaces?: string[];
  labelSelector?: string;
  fieldSelector?: string;
};

type Step = (v: unknown) => unknown[];

const NAME = /[A-Za-z0-9_$-]+/y;
const BRACKET = /\[\*\]|\[(?<item>\d+)\]|\[(?<q>['"])(?<quoted>[^'"]+)\k<q>\]|\[\?\(@\.(?<fpath>[A-Za-z0-9_$.-]+)\s*==\s*(?<literal>[^)]+)\)\]/y;

/** The function giving an object's values at path, as the host computes them; throws saying where path is wrong. */
export function compilePath(path: string): (obj: unknown) => string[] {
  const text = path.trim();
  if (!text) {
    throw new Error("empty field path");
  }
  if (text.endsWith(".")) {
    throw new Error(`field path ${JSON.stringify(path)} ends with a dot`);
  }
  const steps: Step[] = [];
  let i = text.startsWith(".") ? 1 : 0;
  let expectField = true;
  while (i < text.length) {
    if (text[i] === "[") {
      BRACKET.lastIndex = i;
      const m = BRACKET.exec(text);
      if (!m) {
        throw new Error(`field path ${JSON.stringify(path)}: ${JSON.stringify(text.slice(i))} at offset ${i} is not [*], [N], ['name'] or [?(@.field==value)]`);
      }
      steps.push(bracketStep(m.groups ?? {}));
      i = BRACKET.lastIndex;
      expectField = false;
      continue;
    }
    if (text[i] === "." && !expectField) {
      i++;
      expectField = true;
      continue;
    }
    NAME.lastIndex = i;
    const n = expectField ? NAME.exec(text) : null;
    if (!n) {
      throw new Error(
        `field path ${JSON.stringify(path)}: unexpected ${JSON.stringify(text[i])} at offset ${i}; ` +
          "quote a name with dots or slashes as ['name'], for example .metadata.labels['app.kubernetes.io/name']",
      );
    }
    steps.push(fieldStep(n[0]));
    i = NAME.lastIndex;
    expectField = false;
  }
  return (obj) => {
    let current: unknown[] = [obj];
    for (const step of steps) {
      current = current.flatMap(step);
    }
    const out: string[] = [];
    for (const s of current.flatMap(scalars)) {
      if (s && !out.includes(s)) {
        out.push(s);
      }
    }
    return out;
  };
}

const isMap = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);

function fieldStep(name: string): Step {
  return (v) => (isMap(v) && name in v ? [v[name]] : []);
}

function bracketStep(g: Record<string, string | undefined>): Step {
  if (g.quoted !== undefined) {
    return fieldStep(g.quoted);
  }
  if (g.item !== undefined) {
    const n = Number(g.item);
    return (v) => (Array.isArray(v) && n < v.length ? [(v as unknown[])[n]] : []);
  }
  if (g.fpath !== undefined) {
    const fpath = g.fpath.split(".");
    const want = literal((g.literal ?? "").trim());
    return (v) => (Array.isArray(v) ? (v as unknown[]).filter((item) => equalAt(item, fpath, want)) : []);
  }
  return (v) => (Array.isArray(v) ? [...(v as unknown[])] : []);
}

function literal(text: string): unknown {
  if (text.length >= 2 && (text[0] === "'" || text[0] === '"') && text.at(-1) === text[0]) {
    return text.slice(1, -1);
  }
  try {
    return JSON.parse(text) as unknown;
  } catch {
    throw new Error(`${JSON.stringify(text)} is not a literal (true, false, null, a number, or a quoted string)`);
  }
}

function equalAt(item: unknown, fpath: string[], want: unknown): boolean {
  let v = item;
  for (const f of fpath) {
    if (!isMap(v) || !(f in v)) {
      return false;
    }
    v = v[f];
  }
  return v === want;
}

function scalars(v: unknown): string[] {
  if (Array.isArray(v)) {
    return v.filter((item) => !Array.isArray(item)).flatMap(scalars);
  }
  if (typeof v === "string" || typeof v === "number" || typeof v === "boolean") {
    return [String(v)];
  }
  return [];
}

/** Whether obj's controller owner has uid. */
export function controlledBy(obj: KubeResource, uid: string): boolean {
  const refs = (obj.metadata as { ownerReferences?: Array<{ uid?: string; controller?: boolean }> }).ownerReferences ?? [];
  return refs.some((r) => r.controller === true && r.uid === uid);
}
