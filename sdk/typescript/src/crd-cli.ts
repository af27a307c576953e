#!/usr/bin/env node
/**
 * polyop-crd: writes the CRDs of the kinds that modules export.
 *
 *     polyop-crd dist/types.js [more modules...] [-o config/crd/bases]
 *
 * Each module (compiled JavaScript, a path or a package name) is imported and
 * every export that defineKind made is collected; the kinds' versions are
 * grouped into one CRD per group and kind, written as <group>_<plural>.yaml.
 * Exits 1 with the kind, version and field on a schema the API server would
 * refuse, 2 on a wrong command line.
 */
import { realpathSync } from "node:fs";
import { resolve } from "node:path";
import { pathToFileURL } from "node:url";
import { parseArgs } from "node:util";
import { isKind, writeCRDs, type DefinedKind } from "./crd.js";

const usage = "usage: polyop-crd MODULE... [-o DIR]\n  writes one CRD per group and kind exported by the modules (defineKind) into DIR (default config/crd/bases)";

/** Runs the command with args (process.argv without node and the script); returns the exit code. */
export async function main(args: string[]): Promise<number> {
  let parsed;
  try {
    parsed = parseArgs({ args, allowPositionals: true, options: { output: { type: "string", short: "o" }, help: { type: "boolean", short: "h" } } });
  } catch (err) {
    process.stderr.write(`polyop-crd: ${(err as Error).message}\n${usage}\n`);
    return 2;
  }
  if (parsed.values.help) {
    process.stdout.write(usage + "\n");
    return 0;
  }
  if (parsed.positionals.length === 0) {
    process.stderr.write(`polyop-crd: no module given\n${usage}\n`);
    return 2;
  }
  const kinds: DefinedKind[] = [];
  for (const mod of parsed.positionals) {
    const specifier = mod.startsWith(".") || mod.startsWith("/") || /\.[cm]?js$/.test(mod) ? pathToFileURL(resolve(mod)).href : mod;
    let exports: Record<string, unknown>;
    try {
      exports = (await import(specifier)) as Record<string, unknown>;
    } catch (err) {
      const hint = /\.[cm]?tsx?$/.test(mod) ? " (node runs JavaScript: compile the module with tsc and give the .js file)" : "";
      process.stderr.write(`polyop-crd: importing ${mod}: ${(err as Error).message}${hint}\n`);
      return 1;
    }
    const found = Object.values(exports).filter(isKind);
    if (found.length === 0) {
      process.stderr.write(`polyop-crd: ${mod} exports no kind: export what defineKind returns (export const Widget = defineKind({...}))\n`);
      return 1;
    }
    kinds.push(...found);
  }
  try {
    for (const path of await writeCRDs(kinds, parsed.values.output ?? "config/crd/bases")) {
      process.stdout.write(`wrote ${path}\n`);
    }
  } catch (err) {
    process.stderr.write(`${(err as Error).message}\n`);
    return 1;
  }
  return 0;
}

// Run when executed (node dist/crd-cli.js, or the polyop-crd bin), not when imported by a test.
// The bin entry is a symbolic link: compare real paths.
if (process.argv[1] && import.meta.url === pathToFileURL(realpathSync(process.argv[1])).href) {
  process.exitCode = await main(process.argv.slice(2));
}
