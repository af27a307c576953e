// The TypeScript column of docs/vocabulary.md names things that exist: every
// name in backticks is an export of "@polyop/sidecar" (or, as testing.Name and
// crd.Name, of "@polyop/sidecar/testing" and "@polyop/sidecar/crd"), a member of one (Class.method, Interface.member),
// or a member named beside one. Values are checked in the built modules at
// run time; types and interfaces, which have no run-time existence, in the
// built declarations (dist/*.d.ts) through the TypeScript compiler's checker.
//
// A span in backticks after a name that reads as a signature ("(a: A) => R",
// "<T>(a: A) => R", "new (a: A) => C") is that name's declared signature: the
// checker prints the declaration's call (or construct) signatures, and one of
// them must be the table's, parameter names, optionality, types and return
// type alike.
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

/** A signature the table gives a name: the name's check, and the signature as written. */
interface SignatureCheck {
  check: Check;
  signature: string;
}

/** A span that is a signature rather than a name. */
function isSignature(span: string): boolean {
  return /^(?:<[^>]*>)?\(|^new \(/.test(span);
}

/** The cells of a table's row; "\\|" inside a cell (a type union) is a "|". */
function splitRow(line: string): string[] {
  return line
    .replaceAll("\\|", "\0")
    .split("|")
    .slice(1, -1)
    .map((c) => c.trim().replaceAll("\0", "|"));
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
    const cells = splitRow(line);
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
  return parse(cell).names;
}

/** The signatures of one cell, each with the name before it. */
function signatures(cell: string): SignatureCheck[] {
  return parse(cell).signatures;
}

function parse(cell: string): { names: Check[]; signatures: SignatureCheck[] } {
  const out: Check[] = [];
  const sigs: SignatureCheck[] = [];
  let named: Check | undefined; // the last name, whatever its place
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
    } else if (isSignature(m[1]!)) {
      assert.ok(named, `the signature \`${m[1]}\` has no name before it: ${cell}`);
      sigs.push({ check: named, signature: m[1]! });
    } else {
      const name = m[1]!;
      if (inControllerOptions && /^[a-z]\w*$/.test(name)) {
        named = { module: "index", path: ["ControllerOptions", name], written: name };
      } else if (depth > 0 && subject) {
        named = { ...subject, path: [...subject.path, name], written: name };
      } else {
        subject = { ...parsePath(name), written: name };
        named = subject;
      }
      out.push(named);
    }
  }
  return { names: out, signatures: sigs };
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
    const found = lookUp(check);
    return typeof found === "string" ? found : undefined;
  }

  /** The symbol check names (the export, or its member), or why there is none. */
  function lookUp(check: Check): string | { symbol: ts.Symbol; property?: ts.Symbol } {
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
      return { symbol };
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
      return { symbol, property };
    }
    // options `x` of `Class.method`: x is a member of the method's last parameter.
    assert.ok(check.optionOf && deeper.length === 1, `cannot check ${check.path.join(".")}`);
    const option = deeper[0]!;
    const signatures = checker.getTypeOfSymbol(property).getCallSignatures();
    const params = signatures.map((s) => s.getParameters().at(-1)).filter((p) => p !== undefined);
    const optionSymbol = params.map((p) => checker.getPropertyOfType(checker.getNonNullableType(checker.getTypeOfSymbol(p)), option)).find((p) => p);
    return optionSymbol ? { symbol, property: optionSymbol } : `the options of ${name}.${member} have no ${option}`;
  }

  /**
   * The declared signatures of what check names, in arrow style, from their declarations in the built
   * .d.ts files as written there (so that a union keeps its written order): a function or method (each
   * overload), a type alias or property of a function type, an interface's call signatures, or, with
   * construct, a class's constructors as "new (...) => Class".
   */
  function declaredSignatures(check: Check, construct: boolean): string[] | string {
    const found = lookUp(check);
    if (typeof found === "string") {
      return found;
    }
    const symbol = found.property ?? found.symbol;
    const text = (n: ts.Node) => n.getText().replace(/\s+/g, " ");
    const arrow = (d: ts.SignatureDeclarationBase, returns: string) =>
      `${d.typeParameters ? `<${d.typeParameters.map(text).join(", ")}>` : ""}(${d.parameters.map(text).join(", ")}) => ${returns}`;
    const out: string[] = [];
    for (const d of symbol.declarations ?? []) {
      if (construct) {
        if (ts.isClassDeclaration(d)) {
          for (const c of d.members.filter(ts.isConstructorDeclaration)) {
            out.push(`new ${arrow(c, symbol.name)}`);
          }
        }
        continue;
      }
      const fn = ts.isTypeAliasDeclaration(d) || ts.isPropertySignature(d) || ts.isPropertyDeclaration(d) ? d.type : d;
      if (fn && (ts.isFunctionTypeNode(fn) || ts.isFunctionDeclaration(fn) || ts.isMethodDeclaration(fn) || ts.isMethodSignature(fn))) {
        out.push(arrow(fn, fn.type ? text(fn.type) : "void"));
      } else if (ts.isInterfaceDeclaration(d)) {
        for (const c of d.members.filter(ts.isCallSignatureDeclaration)) {
          out.push(arrow(c, c.type ? text(c.type) : "void"));
        }
      }
    }
    return out;
  }

  test("the table has the TypeScript names to check", () => {
    const all = table.flatMap((r) => checks(r.cell));
    assert.ok(table.length >= 25, `only ${table.length} rows found in ${vocabulary}`);
    assert.ok(all.length >= 50, `only ${all.length} names found in the TypeScript column`);
    const sigs = table.flatMap((r) => signatures(r.cell));
    assert.ok(sigs.length >= 15, `only ${sigs.length} signatures found in the TypeScript column`);
  });

  for (const { concept, cell } of table) {
    for (const { check, signature } of signatures(cell)) {
      test(`${concept}: ${check.written} is ${signature}`, () => {
        const declared = declaredSignatures(check, signature.startsWith("new "));
        assert.ok(typeof declared !== "string", declared as string);
        assert.ok(
          declared.includes(signature),
          `the table says ${check.written} is\n\t${signature}\nbut it is declared\n\t${declared.join("\n\t") || "without a signature"}`,
        );
      });
    }
  }

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
