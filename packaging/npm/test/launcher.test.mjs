// Tests of @polyop/cli's launcher (packaging/npm/cli/bin/polyop.js): it runs
// in real node_modules trees, as npm and pnpm lay them out, and runs a shell
// script standing in for polyop, whose output says what reached it.
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";
import { test } from "node:test";

import {
  installCLI,
  installPlatformPackage,
  launcherPid,
  launcherSource,
  nodeStandInScript,
  npmDir,
  standInScript,
  start,
  tempDir,
  writeExecutable,
} from "./helpers.mjs";

const launcher = createRequire(import.meta.url)(launcherSource);
const thisPlatform = launcher.platformPackage(process.platform, process.arch);
const skipUnsupported = thisPlatform ? false : `no package for ${process.platform} ${process.arch}`;

/** Runs the launcher at path with args and the environment extended by env. */
function runLauncher(launcherPath, args, env = {}, options = {}) {
  const env_ = { ...process.env, ...env };
  for (const [k, v] of Object.entries(env)) {
    if (v === undefined) {
      delete env_[k];
    }
  }
  return start(process.execPath, [launcherPath, ...args], { env: env_, ...options });
}

/** The launcher in a temporary folder with a stand-in binary for POLYOP_BINARY. */
function withStandIn(t) {
  const dir = tempDir(t);
  return {
    launcher: installCLI(path.join(dir, "node_modules"), "1.2.3"),
    standIn: writeExecutable(path.join(dir, "stand-in", "polyop"), standInScript),
  };
}

test("each supported platform has its package, and package.json depends on exactly those", () => {
  assert.equal(launcher.platformPackage("linux", "x64"), "@polyop/cli-linux-x64");
  assert.equal(launcher.platformPackage("linux", "arm64"), "@polyop/cli-linux-arm64");
  assert.equal(launcher.platformPackage("darwin", "x64"), "@polyop/cli-darwin-x64");
  assert.equal(launcher.platformPackage("darwin", "arm64"), "@polyop/cli-darwin-arm64");
  for (const [platform, arch] of [["win32", "x64"], ["linux", "ia32"], ["freebsd", "x64"], ["linux", "toString"]]) {
    assert.equal(launcher.platformPackage(platform, arch), undefined, `${platform} ${arch}`);
  }
  const manifest = JSON.parse(fs.readFileSync(path.join(npmDir, "cli", "package.json"), "utf8"));
  assert.deepEqual(Object.keys(manifest.optionalDependencies).sort(), Object.values(launcher.PLATFORM_PACKAGES).sort());
  assert.deepEqual(manifest.bin, { polyop: "bin/polyop.js" });
  assert.equal(manifest.type, "commonjs", "bin/polyop.js uses require");
});

test("the launcher starts with a #! line for node, which npm's bin shims need", () => {
  assert.match(fs.readFileSync(launcherSource, "utf8"), /^#!\/usr\/bin\/env node\n/);
});

test("the platform package's binary runs through node_modules/.bin as npm links it", { skip: skipUnsupported }, async (t) => {
  const nodeModules = path.join(tempDir(t), "node_modules");
  const cli = installCLI(nodeModules, "1.2.3");
  const binary = installPlatformPackage(nodeModules, thisPlatform, "1.2.3");
  fs.mkdirSync(path.join(nodeModules, ".bin"));
  const bin = path.join(nodeModules, ".bin", "polyop");
  fs.symlinkSync(path.relative(path.dirname(bin), cli), bin);

  // The symlink itself is run, its #! line naming node.
  const { exited } = start(bin, ["args", "two words", "", "--flag=x", "ünï"], {
    env: { ...process.env, POLYOP_TEST_ENV: "passed on", POLYOP_BINARY: "" },
  });
  const { code, signal, stdout, stderr } = await exited;
  assert.equal(stderr, "");
  assert.deepEqual({ code, signal }, { code: 0, signal: null });
  assert.equal(stdout.replace(/^launcher \d+\n/, ""), "arg: two words\narg: \narg: --flag=x\narg: ünï\nenv: passed on\n");
  assert.ok(fs.realpathSync(binary).startsWith(fs.realpathSync(nodeModules)));
});

test("the platform package is found from the launcher's real path, as pnpm lays packages out", { skip: skipUnsupported }, async (t) => {
  const dir = tempDir(t);
  // pnpm: the package and its dependencies side by side in a store folder,
  // the project's node_modules linking to it.
  const store = path.join(dir, "node_modules", ".pnpm", "@polyop+cli@1.2.3", "node_modules");
  installCLI(store, "1.2.3");
  installPlatformPackage(store, thisPlatform, "1.2.3");
  fs.mkdirSync(path.join(dir, "node_modules", "@polyop"));
  fs.symlinkSync(path.join(store, "@polyop", "cli"), path.join(dir, "node_modules", "@polyop", "cli"));

  const { code, stdout, stderr } = await runLauncher(path.join(dir, "node_modules", "@polyop", "cli", "bin", "polyop.js"), ["exit", "0"], {
    POLYOP_BINARY: undefined,
  }).exited;
  assert.equal(code, 0, stderr);
  assert.match(stdout, /^launcher \d+$/m);
});

test("without its platform package it says which package is missing and what to do", { skip: skipUnsupported }, async (t) => {
  const nodeModules = path.join(tempDir(t), "node_modules");
  const cli = installCLI(nodeModules, "1.2.3");
  const { code, signal, stdout, stderr } = await runLauncher(cli, ["version"], { POLYOP_BINARY: undefined }).exited;
  assert.deepEqual({ code, signal, stdout }, { code: 1, signal: null, stdout: "" });
  for (const want of [
    `The package ${thisPlatform}, which holds the polyop binary for this platform (${process.platform} ${process.arch}), is not installed.`,
    "linux x64, linux arm64, darwin x64, darwin arm64",
    "--no-optional or --omit=optional",
    "npm install --include=optional --save-dev @polyop/cli@1.2.3",
    "go install github.com/polyop/polyop/cmd/polyop@v1.2.3",
    "POLYOP_BINARY",
  ]) {
    assert.ok(stderr.includes(want), `the message does not say ${JSON.stringify(want)}:\n${stderr}`);
  }
  assert.doesNotMatch(stderr, /installed instead/);
  assert.doesNotMatch(stderr, /\n\s+at /, "the message has a stack trace");
});

test("with another platform's package installed it says node_modules came from another platform", { skip: skipUnsupported }, async (t) => {
  const nodeModules = path.join(tempDir(t), "node_modules");
  const cli = installCLI(nodeModules, "1.2.3");
  const other = Object.values(launcher.PLATFORM_PACKAGES).find((p) => p !== thisPlatform);
  installPlatformPackage(nodeModules, other, "1.2.3");
  const { code, stderr } = await runLauncher(cli, ["version"], { POLYOP_BINARY: undefined }).exited;
  assert.equal(code, 1);
  assert.ok(stderr.includes(`${other} is installed instead`), stderr);
  assert.ok(stderr.includes("npm ci"), stderr);
});

test("findBinary on a platform without a package names the platforms there are and go install", () => {
  assert.throws(
    () => launcher.findBinary({ env: {}, platform: "win32", arch: "x64", version: "1.2.3" }),
    (err) =>
      err instanceof launcher.LaunchError &&
      err.message.includes("no polyop binary for this platform (win32 x64)") &&
      err.message.includes("linux x64, linux arm64, darwin x64, darwin arm64") &&
      err.message.includes("go install github.com/polyop/polyop/cmd/polyop@v1.2.3") &&
      err.message.includes("POLYOP_BINARY"),
  );
});

test("POLYOP_BINARY runs the binary it names instead of the platform package's", { skip: skipUnsupported }, async (t) => {
  const dir = tempDir(t);
  const cli = installCLI(path.join(dir, "node_modules"), "1.2.3");
  installPlatformPackage(path.join(dir, "node_modules"), thisPlatform, "1.2.3");
  // Another stand-in, told apart by what it prints.
  const other = writeExecutable(path.join(dir, "elsewhere", "polyop"), '#!/bin/sh\necho "the other binary: $*"\n');
  // A relative path is from the working directory.
  const { code, stdout, stderr } = await runLauncher(cli, ["a", "b"], { POLYOP_BINARY: path.join("elsewhere", "polyop") }, { cwd: dir }).exited;
  assert.equal(code, 0, stderr);
  assert.equal(stdout, "the other binary: a b\n");
  assert.equal(launcher.findBinary({ env: { POLYOP_BINARY: other } }), other);
});

test("POLYOP_BINARY naming no file fails and says so", async (t) => {
  const { launcher: cli } = withStandIn(t);
  const missing = path.join(path.dirname(cli), "no-such-polyop");
  const { code, stderr } = await runLauncher(cli, ["version"], { POLYOP_BINARY: missing }).exited;
  assert.equal(code, 1);
  assert.ok(stderr.includes(`POLYOP_BINARY is set to ${missing}, which does not exist`), stderr);
});

test("a binary that is not executable fails with the path and chmod", async (t) => {
  const { launcher: cli, standIn } = withStandIn(t);
  fs.chmodSync(standIn, 0o644);
  const { code, stderr } = await runLauncher(cli, ["version"], { POLYOP_BINARY: standIn }).exited;
  assert.equal(code, 1);
  assert.ok(stderr.includes(`could not run ${standIn}`) && stderr.includes(`chmod +x ${standIn}`), stderr);
});

test("the binary's exit code is the launcher's", async (t) => {
  const { launcher: cli, standIn } = withStandIn(t);
  for (const want of [0, 1, 7, 130, 255]) {
    const { code, signal } = await runLauncher(cli, ["exit", String(want)], { POLYOP_BINARY: standIn }).exited;
    assert.deepEqual({ code, signal }, { code: want, signal: null });
  }
});

test("the binary reads the launcher's standard input", async (t) => {
  const { launcher: cli, standIn } = withStandIn(t);
  const p = runLauncher(cli, ["read"], { POLYOP_BINARY: standIn });
  p.child.stdin.end("a line of input\n");
  const { code, stdout } = await p.exited;
  assert.equal(code, 0);
  assert.match(stdout, /^read: a line of input$/m);
});

test("a binary killed by a signal kills the launcher by the same signal", async (t) => {
  const { launcher: cli, standIn } = withStandIn(t);
  for (const sig of ["SIGTERM", "SIGINT", "SIGKILL", "SIGHUP"]) {
    const { code, signal } = await runLauncher(cli, ["die", sig.slice(3)], { POLYOP_BINARY: standIn }).exited;
    assert.deepEqual({ code, signal }, { code: null, signal: sig });
  }
});

test("a binary killed by SIGPIPE, which node ignores, makes the launcher exit with 128+13", async (t) => {
  const { launcher: cli, standIn } = withStandIn(t);
  const { code, signal } = await runLauncher(cli, ["die", "PIPE"], { POLYOP_BINARY: standIn }).exited;
  assert.deepEqual({ code, signal }, { code: 141, signal: null });
});

// The launcher runs in a session of its own (detached), without a terminal,
// as under a process manager: what it is sent goes on to the binary.
for (const sig of ["SIGINT", "SIGTERM"]) {
  test(`${sig} sent to the launcher reaches the binary`, async (t) => {
    const { launcher: cli, standIn } = withStandIn(t);
    const p = runLauncher(cli, ["wait-signals"], { POLYOP_BINARY: standIn }, { detached: true });
    t.after(() => killGroup(p.child.pid));
    const ready = await p.waitFor("ready\n");
    assert.equal(launcherPid(ready), p.child.pid);
    p.child.kill(sig);
    if (sig === "SIGINT") {
      await p.waitFor("got INT\n");
      p.child.kill("SIGTERM");
    }
    const { code, signal, stdout } = await p.exited;
    assert.deepEqual({ code, signal }, { code: 0, signal: null }, stdout);
    assert.equal(stdout.replace(/^launcher \d+\n/, ""), sig === "SIGINT" ? "ready\ngot INT\ngot TERM\n" : "ready\ngot TERM\n");
  });
}

test("SIGTERM sent to the launcher kills a binary without a handler, and the launcher by it", async (t) => {
  const { launcher: cli } = withStandIn(t);
  const dir = tempDir(t);
  const plain = writeExecutable(path.join(dir, "polyop"), '#!/bin/sh\necho ready\nexec sleep 1000\n');
  const p = runLauncher(cli, [], { POLYOP_BINARY: plain }, { detached: true });
  t.after(() => killGroup(p.child.pid));
  await p.waitFor("ready\n");
  p.child.kill("SIGTERM");
  const { code, signal } = await p.exited;
  assert.deepEqual({ code, signal }, { code: null, signal: "SIGTERM" });
});

// script(1) runs the launcher on a pseudo-terminal, in its foreground
// process group, and "\x03" written to it is a Ctrl-C: the terminal sends
// SIGINT to the launcher and the binary both. polyop run takes a second SIGINT
// for "stop at once": the launcher must not pass the terminal's on.
const hasScript = process.platform === "linux" && commandExists("script") && commandExists("setsid");
test("a Ctrl-C in a terminal reaches the binary once", { skip: hasScript ? false : "needs script(1) of util-linux" }, async (t) => {
  const { launcher: cli } = withStandIn(t);
  const standIn = writeExecutable(path.join(tempDir(t), "polyop"), nodeStandInScript);
  // A shell between script and the launcher: script stops itself when its
  // own child is stopped, as the launcher is below. The shell outlives the
  // Ctrl-C (trap), which would otherwise end the terminal's session.
  const command = `trap : INT; ${[process.execPath, cli].map(shellQuote).join(" ")}; exit $?`;
  const p = start("script", ["--quiet", "--flush", "--return", "--command", command, "/dev/null"], {
    env: { ...process.env, SHELL: "/bin/sh", POLYOP_BINARY: standIn },
    detached: true,
  });
  const launcherProcess = launcherPid((await p.waitFor("ready")).replaceAll("\r", ""));
  // The terminal's session is the launcher's: end what a failure leaves.
  const group = processStat(launcherProcess)[2];
  t.after(() => killGroup(group));
  t.after(() => killGroup(p.child.pid));
  // The launcher, stopped, takes its SIGINT only once the binary has taken
  // its own: a SIGINT it passed on would come after, on its own, rather than
  // merge with the terminal's while both were pending.
  process.kill(launcherProcess, "SIGSTOP");
  await until(() => processStat(launcherProcess)[0] === "T");
  p.child.stdin.write("\x03");
  await p.waitFor("got INT");
  process.kill(launcherProcess, "SIGCONT");
  // The launcher handles its signals in order, the lower number first when
  // both are pending: had it passed the SIGINT on, the binary would get it
  // before this SIGTERM.
  process.kill(launcherProcess, "SIGTERM");
  const { code, stdout } = await p.exited;
  const lines = stdout.replaceAll("\r", "").split("\n");
  assert.equal(code, 0, stdout);
  // The terminal echoes the Ctrl-C as ^C.
  assert.equal(lines.filter((l) => l.endsWith("got INT")).length, 1, stdout);
  assert.ok(lines.includes("got TERM"), stdout);
});

// Both ways of telling: /proc (Linux) and ps(1) (the others).
for (const platform of ["linux", "darwin"]) {
  test(`inTerminalForeground is false without a terminal and true in a terminal's foreground (as on ${platform})`, { skip: hasScript ? false : "needs script(1) of util-linux" }, () => {
    const probe = `console.log(String(require(${JSON.stringify(launcherSource)}).inTerminalForeground(${JSON.stringify(platform)})))`;
    const detached = execFileSync("setsid", ["--wait", process.execPath, "-e", probe], { encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] });
    assert.equal(detached.trim(), "false");
    const command = [process.execPath, "-e", probe].map(shellQuote).join(" ");
    const onTerminal = execFileSync("script", ["--quiet", "--return", "--command", command, "/dev/null"], {
      encoding: "utf8",
      stdio: ["pipe", "pipe", "pipe"],
    });
    assert.equal(onTerminal.trim(), "true");
  });
}

/** The fields of /proc/<pid>/stat after the command: state, ppid, pgrp, … */
function processStat(pid) {
  const stat = fs.readFileSync(`/proc/${pid}/stat`, "utf8");
  return stat.slice(stat.lastIndexOf(")") + 2).split(" ");
}

/** Resolves once condition() holds, checking on every turn of the event loop. */
async function until(condition) {
  while (!condition()) {
    await new Promise((resolve) => setImmediate(resolve));
  }
}

function commandExists(name) {
  try {
    execFileSync("sh", ["-c", `command -v ${name}`], { stdio: "ignore" });
    return true;
  } catch {
    return false;
  }
}

function shellQuote(s) {
  return `'${s.replaceAll("'", "'\\''")}'`;
}

/** Ends what is left of a detached process's group (the stand-in's sleep, when a test failed). */
function killGroup(pid) {
  try {
    process.kill(-pid, "SIGKILL");
  } catch {
    // Gone already.
  }
}
