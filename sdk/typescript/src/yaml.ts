/**
 * A YAML writer for JSON values, enough for manifests: block mappings with
 * sorted keys (as sigs.k8s.io/yaml, so controller-gen's CRDs and ours read
 * alike), block sequences, literal blocks for multi-line strings, and
 * JSON's quoting for any string YAML could read as something else.
 */
export function toYAML(value: unknown): string {
  const lines: string[] = [];
  write(value, 0, lines, "");
  return lines.join("\n") + "\n";
}

const plain = /^[A-Za-z_/.$][-A-Za-z0-9_ ./()$]*$/;
const reserved = /^(true|false|yes|no|on|off|y|n|null|~)$/i;

function scalar(v: unknown, indent: number): string {
  if (v === null || v === undefined) {
    return "null";
  }
  if (typeof v === "number" || typeof v === "boolean") {
    return String(v);
  }
  const s = typeof v === "string" ? v : JSON.stringify(v);
  // A plain scalar unless YAML would read another type or structure in it (".5" is a float, ".inf" too).
  const other = reserved.test(s) || /^\.(inf|nan)$/i.test(s) || !Number.isNaN(Number(s));
  if (plain.test(s) && !other && !s.endsWith(" ") && !s.includes(" #") && !s.includes(": ")) {
    return s;
  }
  // A literal block keeps a multi-line description readable.
  if (s.includes("\n") && !/^[ \t]|[ \t]$|\r|\t|[ \t]\n|\n[ \t]/.test(s) && !s.endsWith("\n") && /^[\x20-\x7e\n]*$/.test(s)) {
    const pad = " ".repeat(indent + 2);
    return "|-\n" + s.split("\n").map((l) => (l ? pad + l : "")).join("\n");
  }
  return JSON.stringify(s);
}

function key(k: string): string {
  return /^[A-Za-z0-9_][-A-Za-z0-9_.$/]*$/.test(k) && !reserved.test(k) ? k : JSON.stringify(k);
}

function isBlock(v: unknown): boolean {
  return typeof v === "object" && v !== null && (Array.isArray(v) ? v.length > 0 : Object.keys(v).length > 0);
}

function write(v: unknown, indent: number, lines: string[], prefix: string) {
  const pad = " ".repeat(indent);
  if (Array.isArray(v)) {
    for (const item of v) {
      if (isBlock(item) && !Array.isArray(item)) {
        // "- key: value" with the mapping's other keys under it.
        const sub: string[] = [];
        write(item, indent + 2, sub, "");
        sub[0] = pad + "- " + sub[0]!.slice(indent + 2);
        lines.push(...sub);
      } else if (isBlock(item)) {
        lines.push(pad + "-");
        write(item, indent + 2, lines, "");
      } else {
        lines.push(pad + "- " + inline(item, indent));
      }
    }
    return;
  }
  if (typeof v === "object" && v !== null) {
    for (const k of Object.keys(v).sort()) {
      const child = (v as Record<string, unknown>)[k];
      if (child === undefined) {
        continue;
      }
      if (isBlock(child)) {
        lines.push(pad + key(k) + ":");
        write(child, Array.isArray(child) ? indent : indent + 2, lines, "");
      } else {
        lines.push(pad + key(k) + ": " + inline(child, indent));
      }
    }
    return;
  }
  lines.push(pad + prefix + inline(v, indent));
}

function inline(v: unknown, indent: number): string {
  if (Array.isArray(v)) {
    return "[]";
  }
  if (typeof v === "object" && v !== null) {
    return "{}";
  }
  return scalar(v, indent);
}
