// Tests of packaging/npm/build.mjs: it packs, with the real npm, packages
// from small stand-in binaries, and the tarballs are read back.
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { test } from "node:test";

import { BuildError, build, npmPlatform, reportSizes } from "../build.mjs";
import { npmDir, start, tarEntries, tempDir, writeExecutable } from "./helpers.mjs";

const allPlatforms = ["@polyop/cli-darwin-arm64", "@polyop/cli-darwin-x64", "@polyop/cli-linux-arm64", "@polyop/cli-linux-x64"];

/** A DIST_DIR/bin with a stand-in binary for each GOOS/GOARCH. */
function binDir(t, ...platforms) {
  const dir = path.join(tempDir(t), "bin");
  for (const p of platforms) {
    writeExecutable(path.join(dir, `polyop-${p.replace("/", "-")}`), `#!/bin/sh\necho "polyop for ${p}"\n`);
  }
  return dir;
}

/** What a tarball holds, by path. */
function entries(tgz) {
  return new Map(tarEntries(tgz).map((e) => [e.path, e]));
}

/** The package.json inside a tarball. */
function manifestOf(tgz, out) {
  const dir = fs.mkdtempSync(path.join(out, "x-"));
  const tar = start("tar", ["-xzf", tgz, "-C", dir]);
  return tar.exited.then(({ code, stderr }) => {
    assert.equal(code, 0, stderr);
    return JSON.parse(fs.readFileSync(path.join(dir, "package", "package.json"), "utf8"));
  });
}

test("GOOS/GOARCH pairs map to npm's os and cpu", () => {
  assert.deepEqual(npmPlatform("linux/amd64"), { goos: "linux", goarch: "amd64", os: "linux", cpu: "x64", name: "@polyop/cli-linux-x64" });
  assert.deepEqual(npmPlatform("linux/arm64"), { goos: "linux", goarch: "arm64", os: "linux", cpu: "arm64", name: "@polyop/cli-linux-arm64" });
  assert.deepEqual(npmPlatform("darwin/amd64"), { goos: "darwin", goarch: "amd64", os: "darwin", cpu: "x64", name: "@polyop/cli-darwin-x64" });
  assert.deepEqual(npmPlatform("darwin/arm64"), { goos: "darwin", goarch: "arm64", os: "darwin", cpu: "arm64", name: "@polyop/cli-darwin-arm64" });
  for (const unknown of ["windows/amd64", "linux/386", "linux", "linux/amd64/v3", ""]) {
    assert.throws(() => npmPlatform(unknown), (err) => err instanceof BuildError && err.message.includes("PLATFORMS may hold linux/amd64"), unknown);
  }
});

test("build packs @polyop/cli for every platform and a package for each platform given", async (t) => {
  const out = tempDir(t);
  const packed = build({ version: "1.2.3", platforms: ["linux/amd64", "darwin/arm64"], binDir: binDir(t, "linux/amd64", "darwin/arm64"), out });
  assert.deepEqual(packed.map((p) => p.filename).sort(), [
    "polyop-cli-1.2.3.tgz",
    "polyop-cli-darwin-arm64-1.2.3.tgz",
    "polyop-cli-linux-x64-1.2.3.tgz",
  ]);
  assert.deepEqual(fs.readdirSync(out).filter((f) => f.endsWith(".tgz")).sort(), packed.map((p) => p.filename).sort());

  const cli = path.join(out, "polyop-cli-1.2.3.tgz");
  const main = await manifestOf(cli, out);
  assert.equal(main.name, "@polyop/cli");
  assert.equal(main.version, "1.2.3");
  assert.deepEqual(main.bin, { polyop: "bin/polyop.js" });
  // Every platform, not only those built: the published set is complete.
  assert.deepEqual(Object.keys(main.optionalDependencies).sort(), allPlatforms);
  assert.ok(Object.values(main.optionalDependencies).every((v) => v === "1.2.3"), JSON.stringify(main.optionalDependencies));
  const cliFiles = entries(cli);
  assert.deepEqual([...cliFiles.keys()].sort(), ["README.md", "bin/polyop.js", "package.json"]);
  assert.equal(cliFiles.get("bin/polyop.js").mode & 0o777, 0o755);
  assert.equal(
    cliFiles.get("bin/polyop.js").size,
    fs.statSync(path.join(npmDir, "cli", "bin", "polyop.js")).size,
    "the launcher is packed as it is in packaging/npm/cli",
  );

  for (const [file, os, cpu, goPlatform] of [
    ["polyop-cli-linux-x64-1.2.3.tgz", "linux", "x64", "linux/amd64"],
    ["polyop-cli-darwin-arm64-1.2.3.tgz", "darwin", "arm64", "darwin/arm64"],
  ]) {
    const tgz = path.join(out, file);
    const manifest = await manifestOf(tgz, out);
    assert.equal(manifest.name, `@polyop/cli-${os}-${cpu}`);
    assert.equal(manifest.version, "1.2.3");
    assert.deepEqual({ os: manifest.os, cpu: manifest.cpu }, { os: [os], cpu: [cpu] });
    assert.equal(manifest.bin, undefined, "a platform package links no command of its own");
    const files = entries(tgz);
    assert.deepEqual([...files.keys()].sort(), ["README.md", "bin/polyop", "package.json"]);
    assert.equal(files.get("bin/polyop").mode & 0o777, 0o755, `${file}: bin/polyop is not 0755`);
    assert.equal(files.get("bin/polyop").size, `#!/bin/sh\necho "polyop for ${goPlatform}"\n`.length);
  }
});

test("build says which binary is missing and how to build it", (t) => {
  assert.throws(
    () => build({ version: "1.2.3", platforms: ["linux/amd64", "linux/arm64"], binDir: binDir(t, "linux/amd64"), out: tempDir(t) }),
    (err) => err instanceof BuildError && err.message.includes("polyop-linux-arm64 is missing") && err.message.includes("make release-binaries PLATFORMS=linux/arm64"),
  );
});

test("build refuses a version that is not one", (t) => {
  for (const version of ["", "v1.2.3", "dev", "1.2"]) {
    assert.throws(
      () => build({ version, platforms: ["linux/amd64"], binDir: binDir(t, "linux/amd64"), out: tempDir(t) }),
      (err) => err instanceof BuildError && err.message.includes("--version"),
      version,
    );
  }
});

test("reportSizes prints each tarball's size and names those over the budget", (t) => {
  const dir = tempDir(t);
  fs.writeFileSync(path.join(dir, "small.tgz"), Buffer.alloc(1000));
  fs.writeFileSync(path.join(dir, "large.tgz"), Buffer.alloc(20 * 1000 * 1000 + 1));
  fs.writeFileSync(path.join(dir, "notes.txt"), "");
  const lines = [];
  assert.deepEqual(reportSizes(dir, (line) => lines.push(line)), ["large.tgz"]);
  assert.equal(lines.length, 2);
  assert.match(lines[0], /^ +20\.0 MB {2}.*large\.tgz {2}over 20 MB$/);
  assert.match(lines[1], /^ +1\.0 kB {2}.*small\.tgz$/);
});

test("build.mjs run as a command fails with a message and no stack", async () => {
  const { code, stderr } = await start(process.execPath, [path.join(npmDir, "build.mjs"), "--version", "1.2.3"]).exited;
  assert.equal(code, 1);
  assert.equal(stderr, "packaging/npm/build.mjs: --platforms is required (see the comment at the top of packaging/npm/build.mjs)\n");
});
