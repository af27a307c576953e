// The TypeScript column of docs/vocabulary.md names things that exist: every
// name in backticks is an export of "@polyop/sidecar" (or, as testing.Name and
// crd.Name, of "@polyop/sidecar/testing" and "@polyop/sidecar/crd"), a member of one (Class.method, Interface.member),
// or a member named beside one. Values are checked in the built modules at
// run time; types and interfaces, which have no run-time existence, in the
// built declarations (dist/*.d.ts) through the TypeScript compiler's checker.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { describe, test } from "node:test";

import ts from "typescript";

import * as index from "./index.js";
import * as crdModule from "./crd.js";
import * as testingModule from "./testing.js";

/** A name to check: path[0] is an export of module; path[1], when present, a member of it. */
interface Check {
  module: "index" | "testing" | "crd";
  path: string[];
  /** The name is a member of the last parameter (the options) of the method path names. */
  optionOf?: boolean;
  /** How the table wrote it, for the failure message. */
  written: string;
}

const vocabulary = fileURLToPath(new URL("../../../docs/vocabulary.md", import.meta.url));

/** The TypeScript cell of every row of every table, with the row's concept. */
function rows(markdown: string): Array<{ concept: string; cell: string }> {
  const out: Array<{ concept: string; cell: string }> = [];
  let column = -1;
  for (const line of markdown.split("\n")) {
    if (!line.startsWith("|")) {
      column = -1;
      continue;
    }
    const cells = line.split("|").slice(1, -1).map((c) => c.trim());
    if (column < 0) {
      column = cells.indexOf("TypeScript");
      assert.ok(column > 0, `a table of ${vocabulary} has no TypeScript column: ${line}`);
      continue;
    }
    if (cells.every((c) => /^-+$/.test(c))) {
      continue;
    }
    out.push({ concept: cells[0] ?? "", cell: cells[column] ?? "" });
  }
  return out;
}

/** A dotted name as written in the table, as a module and a path. */
function parsePath(name: string): Pick<Check, "module" | "path"> {
  const parts = name.split(".");
  return parts[0] === "testing" || parts[0] === "crd" ? { module: parts[0], path: parts.slice(1) } : { module: "index", path: parts };
}

/**
 * The checks of one cell. A name at the top level is an export or a member of
 * one (Class.member); a name in parentheses after it is a member of it
 * (`Result` (`requeueAfter`, ...)). Two phrasings place names elsewhere:
 * "in the controller options" makes the cell's plain lower-case names members
 * of ControllerOptions, and "options `a`, `b` of `X.method`" makes a and b
 * members of the method's options (its last parameter).
 */
function checks(cell: string): Check[] {
  const out: Check[] = [];
  let rest = cell;
  const options = /options ((?:`\w+`(?:, )?)+) of `([\w.]+)`/.exec(rest);
  if (options) {
    const method = parsePath(options[2]!);
    for (const [, name] of options[1]!.matchAll(/`(\w+)`/g)) {
      out.push({ ...method, path: [...method.path, name!], optionOf: true, written: name! });
    }
    out.push({ ...method, written: options[2]! });
    rest = rest.replace(options[0], "");
  }
  const inControllerOptions = rest.includes("in the controller options");
  let depth = 0;
  let subject: Check | undefined;
  for (const m of rest.matchAll(/`([^`]+)`|\(|\)/g)) {
    if (m[0] === "(") {
      depth++;
    } else if (m[0] === ")") {
      depth--;
    } else {
      const name = m[1]!;
      if (inControllerOptions && /^[a-z]\w*$/.test(name)) {
        out.push({ module: "index", path: ["ControllerOptions", name], written: name });
      } else if (depth > 0 && subject) {
        out.push({ ...subject, path: [...subject.path, name], written: name });
      } else {
        subject = { ...parsePath(name), written: name };
        out.push(subject);
      }
    }
  }
  return out;
}

/** A #private member. */
function isPrivateName(d: ts.Declaration): boolean {
  const name = (d as ts.NamedDeclaration).name;
  return name !== undefined && ts.isPrivateIdentifier(name);
}

/** The built declarations, through the TypeScript checker. */
function declarations() {
  const dist = (file: string) => fileURLToPath(new URL(file, import.meta.url));
  const files = { index: dist("./index.d.ts"), testing: dist("./testing.d.ts"), crd: dist("./crd.d.ts") };
  const program = ts.createProgram(Object.values(files), {
    module: ts.ModuleKind.NodeNext,
    moduleResolution: ts.ModuleResolutionKind.NodeNext,
    target: ts.ScriptTarget.ES2022,
    types: [],
    noEmit: true,
    skipLibCheck: true,
  });
  const checker = program.getTypeChecker();
  const exportsOf = (file: string) => {
    const source = program.getSourceFile(file);
    assert.ok(source, `${file} is not built: run tsc -b first`);
    const symbol = checker.getSymbolAtLocation(source);
    assert.ok(symbol, `${file} is not a module`);
    return new Map(checker.getExportsOfModule(symbol).map((s) => [s.name, s]));
  };
  return { checker, exports: { index: exportsOf(files.index), testing: exportsOf(files.testing), crd: exportsOf(files.crd) } };
}

describe("docs/vocabulary.md, the TypeScript column", () => {
  const table = rows(readFileSync(vocabulary, "utf8"));
  const { checker, exports } = declarations();
  const runtime: Record<Check["module"], Record<string, unknown>> = { index, testing: testingModule, crd: crdModule };

  /** Why check does not hold; undefined when it does. */
  function missing(check: Check): string | undefined {
    const [name, member, ...deeper] = check.path;
    const where = check.module === "index" ? '"@polyop/sidecar"' : `"@polyop/sidecar/${check.module}"`;
    let symbol = exports[check.module].get(name!);
    if (!symbol) {
      return `${name} is not exported by ${where}`;
    }
    if (symbol.flags & ts.SymbolFlags.Alias) {
      symbol = checker.getAliasedSymbol(symbol);
    }
    const value = runtime[check.module][name!];
    if (symbol.flags & ts.SymbolFlags.Value && value === undefined) {
      return `${name} is declared but not exported at run time by ${where}`;
    }
    if (member === undefined) {
      return undefined;
    }
    // A member of a class or interface (its instances), or of a value (a class's statics, an object's properties).
    const types = [checker.getDeclaredTypeOfSymbol(symbol), checker.getTypeOfSymbol(symbol)];
    const property = types.map((t) => checker.getPropertyOfType(checker.getApparentType(t), member)).find((p) => p !== undefined);
    if (!property) {
      return `${name} has no member ${member}`;
    }
    const hidden = ts.ModifierFlags.Private | ts.ModifierFlags.Protected;
    if ((property.declarations ?? []).every((d) => ts.getCombinedModifierFlags(d) & hidden || isPrivateName(d))) {
      return `${name}.${member} is not public`;
    }
    if (symbol.flags & ts.SymbolFlags.Class && typeof value === "function") {
      const prototype = (value as { prototype: Record<string, unknown> }).prototype;
      const isMethod = property.flags & ts.SymbolFlags.Method;
      if (isMethod && typeof prototype[member] !== "function" && typeof (value as unknown as Record<string, unknown>)[member] !== "function") {
        return `${name}.${member} is declared but is no method at run time`;
      }
    }
    if (deeper.length === 0) {
      return undefined;
    }
    // options `x` of `Class.method`: x is a member of the method's last parameter.
    assert.ok(check.optionOf && deeper.length === 1, `cannot check ${check.path.join(".")}`);
    const option = deeper[0]!;
    const signatures = checker.getTypeOfSymbol(property).getCallSignatures();
    const params = signatures.map((s) => s.getParameters().at(-1)).filter((p) => p !== undefined);
    const found = params.some((p) => checker.getPropertyOfType(checker.getNonNullableType(checker.getTypeOfSymbol(p)), option));
    return found ? undefined : `the options of ${name}.${member} have no ${option}`;
  }

  test("the table has the TypeScript names to check", () => {
    const all = table.flatMap((r) => checks(r.cell));
    assert.ok(table.length >= 25, `only ${table.length} rows found in ${vocabulary}`);
    assert.ok(all.length >= 50, `only ${all.length} names found in the TypeScript column`);
  });

  for (const { concept, cell } of table) {
    const list = checks(cell);
    if (list.length === 0) {
      continue; // commentary only, for example "(always async)"
    }
    test(concept, () => {
      const problems = list.map((c) => [c.written, missing(c)] as const).filter(([, problem]) => problem !== undefined);
      assert.deepEqual(problems, [], `the TypeScript column says ${cell}`);
    });
  }
});
