#!/usr/bin/env node
// Builds polyop's npm packages from release binaries and packs each with
// npm pack: @polyop/cli (the launcher, cli/), which lists a package for every
// platform as an optional dependency, and @polyop/cli-<os>-<cpu> (from
// platform/) for each of the given platforms, holding its binary.
//
//	node packaging/npm/build.mjs --version 0.1.0 --platforms "linux/amd64 darwin/arm64" \
//	    --bin-dir dist/bin --out dist/npm
//
// The binaries are --bin-dir/polyop-<goos>-<goarch>, as `make release-binaries`
// builds them. The package folders are written into --out/packages, the
// tarballs (polyop-cli-<version>.tgz, polyop-cli-<os>-<cpu>-<version>.tgz)
// into --out, and the size of every tarball in --out is printed. `make
// release-npm` runs it. npm is $NPM, else npm on PATH.
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";

const here = path.dirname(fileURLToPath(import.meta.url));
const { PLATFORM_PACKAGES, BINARY_SUBPATH } = createRequire(import.meta.url)("./cli/bin/polyop.js");

/** Go's names of the operating systems and CPUs there are packages for, and npm's (Node.js's). */
export const GOOS_TO_NPM = Object.freeze({ linux: "linux", darwin: "darwin" });
export const GOARCH_TO_NPM = Object.freeze({ amd64: "x64", arm64: "arm64" });

/** The size over which a tarball is reported as too large: npm serves every install of it. */
export const SIZE_BUDGET = 20 * 1000 * 1000;

/** A fault in the build's input, printed without a stack. */
export class BuildError extends Error {}

/**
 * The npm platform of a GOOS/GOARCH pair: its os, cpu and package name.
 *
 * @param {string} goPlatform e.g. linux/amd64
 * @returns {{ goos: string, goarch: string, os: string, cpu: string, name: string }}
 */
export function npmPlatform(goPlatform) {
  const [goos, goarch, extra] = goPlatform.split("/");
  const os = GOOS_TO_NPM[goos];
  const cpu = GOARCH_TO_NPM[goarch];
  const name = os && cpu ? PLATFORM_PACKAGES[`${os} ${cpu}`] : undefined;
  if (extra !== undefined || !name) {
    const known = Object.keys(GOOS_TO_NPM).flatMap((o) => Object.keys(GOARCH_TO_NPM).map((a) => `${o}/${a}`));
    throw new BuildError(`no npm package for the platform ${goPlatform}: PLATFORMS may hold ${known.join(", ")}`);
  }
  return { goos, goarch, os, cpu, name };
}

/**
 * Writes the package folders into out/packages and packs them into out.
 *
 * @param {object} options
 * @param {string} options.version the packages' version (the VERSION file's)
 * @param {string[]} options.platforms GOOS/GOARCH pairs to build platform packages for
 * @param {string} options.binDir where the binaries polyop-<goos>-<goarch> are
 * @param {string} options.out where the tarballs go
 * @param {string} [options.npm] the npm command
 * @returns {{ name: string, filename: string, size: number }[]} the tarballs packed
 */
export function build({ version, platforms, binDir, out, npm = "npm" }) {
  if (!/^\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?$/.test(version ?? "")) {
    throw new BuildError(`the version ${JSON.stringify(version)} is not a version such as 1.2.3: pass --version with the VERSION file's`);
  }
  const targets = [...new Set(platforms)].map(npmPlatform);
  const staging = path.join(out, "packages");
  fs.rmSync(staging, { recursive: true, force: true });
  fs.mkdirSync(staging, { recursive: true });

  const folders = [writeCLIPackage(path.join(staging, "cli"), version)];
  for (const target of targets) {
    const binary = path.join(binDir, `polyop-${target.goos}-${target.goarch}`);
    if (!fs.existsSync(binary)) {
      throw new BuildError(`${binary} is missing: build it first with make release-binaries PLATFORMS=${target.goos}/${target.goarch}`);
    }
    folders.push(writePlatformPackage(path.join(staging, `cli-${target.os}-${target.cpu}`), target, version, binary));
  }
  return folders.map((folder) => pack(folder, out, npm));
}

/** Writes @polyop/cli from cli/: the launcher, its README and its package.json at version. */
function writeCLIPackage(dir, version) {
  const manifest = JSON.parse(fs.readFileSync(path.join(here, "cli", "package.json"), "utf8"));
  const listed = Object.keys(manifest.optionalDependencies ?? {}).sort();
  const wanted = Object.values(PLATFORM_PACKAGES).sort();
  if (listed.join() !== wanted.join()) {
    throw new BuildError(
      `cli/package.json's optionalDependencies (${listed.join(", ")}) are not the launcher's platform packages (${wanted.join(", ")}): make them the same`,
    );
  }
  manifest.version = version;
  for (const name of listed) {
    manifest.optionalDependencies[name] = version;
  }
  fs.mkdirSync(path.join(dir, "bin"), { recursive: true });
  fs.copyFileSync(path.join(here, "cli", "bin", "polyop.js"), path.join(dir, "bin", "polyop.js"));
  fs.chmodSync(path.join(dir, "bin", "polyop.js"), 0o755);
  fs.copyFileSync(path.join(here, "cli", "README.md"), path.join(dir, "README.md"));
  fs.writeFileSync(path.join(dir, "package.json"), `${JSON.stringify(manifest, null, 2)}\n`);
  return dir;
}

/** Writes a platform package from platform/: its package.json, README and binary (mode 0755). */
function writePlatformPackage(dir, target, version, binary) {
  const fill = (template) =>
    fs
      .readFileSync(path.join(here, "platform", template), "utf8")
      .replaceAll("{{name}}", target.name)
      .replaceAll("{{version}}", version)
      .replaceAll("{{os}}", target.os)
      .replaceAll("{{cpu}}", target.cpu);
  const manifest = JSON.parse(fill("package.json.tmpl"));
  fs.mkdirSync(path.join(dir, path.dirname(BINARY_SUBPATH)), { recursive: true });
  fs.writeFileSync(path.join(dir, "package.json"), `${JSON.stringify(manifest, null, 2)}\n`);
  fs.writeFileSync(path.join(dir, "README.md"), fill("README.md.tmpl"));
  fs.copyFileSync(binary, path.join(dir, BINARY_SUBPATH));
  fs.chmodSync(path.join(dir, BINARY_SUBPATH), 0o755);
  return dir;
}

/** Packs the package in folder into out with npm pack and checks what it holds. */
function pack(folder, out, npm) {
  const stdout = execFileSync(npm, ["pack", "--json", "--ignore-scripts", "--pack-destination", path.resolve(out), path.resolve(folder)], {
    cwd: out,
    encoding: "utf8",
    stdio: ["ignore", "pipe", "inherit"],
  });
  const [result] = JSON.parse(stdout);
  const manifest = JSON.parse(fs.readFileSync(path.join(folder, "package.json"), "utf8"));
  const files = new Map(result.files.map((f) => [f.path, f]));
  const wanted = manifest.bin ? Object.values(manifest.bin) : [BINARY_SUBPATH];
  for (const file of wanted) {
    if (!files.has(file) || (files.get(file).mode & 0o111) === 0) {
      throw new BuildError(`${result.filename} holds no executable ${file}: see ${path.join(folder, "package.json")}'s files`);
    }
  }
  return { name: result.name, filename: result.filename, size: result.size };
}

/** Prints the size of every tarball in dir, and returns those over SIZE_BUDGET. */
export function reportSizes(dir, log = console.log) {
  const over = [];
  for (const file of fs.readdirSync(dir).filter((f) => f.endsWith(".tgz")).sort()) {
    const size = fs.statSync(path.join(dir, file)).size;
    const flag = size > SIZE_BUDGET ? `  over ${SIZE_BUDGET / 1e6} MB` : "";
    log(`${formatSize(size).padStart(9)}  ${path.join(dir, file)}${flag}`);
    if (flag) {
      over.push(file);
    }
  }
  return over;
}

/** A size in bytes as people read it: 18.9 MB, 5.5 kB. */
export function formatSize(bytes) {
  return bytes >= 1e6 ? `${(bytes / 1e6).toFixed(1)} MB` : `${(bytes / 1e3).toFixed(1)} kB`;
}

function main() {
  const { values } = parseArgs({
    options: {
      version: { type: "string" },
      platforms: { type: "string" },
      "bin-dir": { type: "string" },
      out: { type: "string" },
    },
  });
  for (const required of ["version", "platforms", "bin-dir", "out"]) {
    if (values[required] === undefined) {
      throw new BuildError(`--${required} is required (see the comment at the top of packaging/npm/build.mjs)`);
    }
  }
  fs.mkdirSync(values.out, { recursive: true });
  const packed = build({
    version: values.version,
    platforms: values.platforms.split(/[\s,]+/).filter(Boolean),
    binDir: values["bin-dir"],
    out: values.out,
    npm: process.env.NPM || "npm",
  });
  console.log(`Packed ${packed.map((p) => p.filename).join(", ")}`);
  const over = reportSizes(values.out);
  if (over.length > 0) {
    console.log(`${over.join(", ")}: larger than ${SIZE_BUDGET / 1e6} MB, which every npm install of polyop downloads`);
  }
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  try {
    main();
  } catch (err) {
    if (!(err instanceof BuildError)) {
      throw err;
    }
    console.error(`packaging/npm/build.mjs: ${err.message}`);
    process.exitCode = 1;
  }
}
