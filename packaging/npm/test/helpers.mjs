// What the tests of packaging/npm share: the folders they copy packages
// from, a stand-in for the polyop binary, a way to lay out a node_modules
// tree, and child processes whose output a test can wait on.
import { spawn } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { gunzipSync } from "node:zlib";

/** packaging/npm. */
export const npmDir = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
/** The launcher's source. */
export const launcherSource = path.join(npmDir, "cli", "bin", "polyop.js");

/**
 * A shell script standing in for polyop. It prints "launcher <pid>" (its
 * parent's pid), then acts on its first argument:
 *
 *   args …          prints each further argument as "arg: <it>" and $POLYOP_TEST_ENV
 *   exit <n>        exits with n
 *   read            reads a line from its standard input and prints "read: <it>"
 *   die <SIGNAL>    kills itself with the signal, its default action restored
 *   wait-signals    prints "ready", then "got INT" for every SIGINT, and on
 *                   SIGTERM "got TERM" before exiting with 0
 */
export const standInScript = `#!/bin/sh
echo "launcher $PPID"
case "$1" in
args)
	shift
	for a in "$@"; do echo "arg: $a"; done
	echo "env: $POLYOP_TEST_ENV"
	;;
exit)
	exit "$2"
	;;
read)
	read -r line
	echo "read: $line"
	;;
die)
	trap - "$2"
	kill -s "$2" $$
	;;
wait-signals)
	# wait returns on each trapped signal. A Ctrl-C can reach the sleep
	# before it ignores SIGINT, as a background job of a shell without job
	# control does: then another one starts.
	trap 'echo "got INT"' INT
	trap 'echo "got TERM"; kill "$sleeper" 2>/dev/null; exit 0' TERM
	sleep 1000 &
	sleeper=$!
	echo ready
	while :; do
		wait "$sleeper"
		kill -0 "$sleeper" 2>/dev/null || { sleep 1000 & sleeper=$!; }
	done
	;;
esac
`;

/**
 * A stand-in for polyop in JavaScript, run by this node, for counting
 * signals: it prints "launcher <pid>" and "ready", then "got INT" for every
 * SIGINT delivered, and "got TERM" on SIGTERM before exiting with 0. Node.js
 * sees each delivery of a signal, where a shell's trap runs once for signals
 * that arrive close together.
 */
export const nodeStandInScript = `#!${process.execPath}
process.stdout.write("launcher " + process.ppid + "\\n");
process.on("SIGINT", () => process.stdout.write("got INT\\n"));
process.on("SIGTERM", () => {
  process.stdout.write("got TERM\\n");
  process.exit(0);
});
setInterval(() => {}, 1 << 30);
process.stdout.write("ready\\n");
`;

/** A temporary folder, removed when the test ends. */
export function tempDir(t) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "polyop-npm-"));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  return dir;
}

/** Writes an executable file. */
export function writeExecutable(file, content) {
  fs.mkdirSync(path.dirname(file), { recursive: true });
  fs.writeFileSync(file, content);
  fs.chmodSync(file, 0o755);
  return file;
}

/**
 * Installs @polyop/cli from packaging/npm/cli into nodeModules, at version,
 * as npm would: its files and its package.json with the version stamped.
 * Returns the launcher's path there.
 */
export function installCLI(nodeModules, version) {
  const dir = path.join(nodeModules, "@polyop", "cli");
  const manifest = JSON.parse(fs.readFileSync(path.join(npmDir, "cli", "package.json"), "utf8"));
  manifest.version = version;
  fs.mkdirSync(path.join(dir, "bin"), { recursive: true });
  fs.writeFileSync(path.join(dir, "package.json"), JSON.stringify(manifest, null, 2));
  return writeExecutable(path.join(dir, "bin", "polyop.js"), fs.readFileSync(launcherSource));
}

/**
 * Installs a platform package with the stand-in as its binary into
 * nodeModules. Returns the binary's path.
 */
export function installPlatformPackage(nodeModules, name, version) {
  const dir = path.join(nodeModules, ...name.split("/"));
  fs.mkdirSync(dir, { recursive: true });
  fs.writeFileSync(path.join(dir, "package.json"), JSON.stringify({ name, version }));
  return writeExecutable(path.join(dir, "bin", "polyop"), standInScript);
}

/**
 * Starts a process and collects its output. exited resolves once it has
 * exited and its output is read: { code, signal, stdout, stderr }.
 * waitFor(text, count) resolves once its standard output holds text count
 * times (once by default).
 */
export function start(command, args, options = {}) {
  const child = spawn(command, args, { stdio: ["pipe", "pipe", "pipe"], ...options });
  let stdout = "";
  let stderr = "";
  const waiters = [];
  const has = (text, count) => stdout.split(text).length > count;
  child.stdout.setEncoding("utf8").on("data", (chunk) => {
    stdout += chunk;
    for (const w of waiters.filter((w) => has(w.text, w.count))) {
      waiters.splice(waiters.indexOf(w), 1);
      w.resolve(stdout);
    }
  });
  child.stderr.setEncoding("utf8").on("data", (chunk) => {
    stderr += chunk;
  });
  const exited = new Promise((resolve, reject) => {
    child.on("error", reject);
    child.on("close", (code, signal) => {
      for (const w of waiters) {
        w.reject(new Error(`the process exited (${code ?? signal}) before printing ${JSON.stringify(w.text)} ${w.count} times:\n${stdout}\n${stderr}`));
      }
      resolve({ code, signal, stdout, stderr });
    });
  });
  const waitFor = (text, count = 1) =>
    has(text, count) ? Promise.resolve(stdout) : new Promise((resolve, reject) => waiters.push({ text, count, resolve, reject }));
  return { child, exited, waitFor, output: () => ({ stdout, stderr }) };
}

/** The process id the stand-in printed as its launcher's. */
export function launcherPid(stdout) {
  const m = /^launcher (\d+)$/m.exec(stdout);
  if (!m) {
    throw new Error(`the stand-in printed no launcher pid:\n${stdout}`);
  }
  return Number(m[1]);
}

/**
 * The entries of a .tgz npm pack wrote: path (without package/), mode and
 * size, read from the tar headers.
 */
export function tarEntries(tgz) {
  const tar = gunzipSync(fs.readFileSync(tgz));
  const entries = [];
  const field = (header, start, length) => header.subarray(start, start + length).toString("utf8").replace(/\0.*$/s, "");
  for (let at = 0; at + 512 <= tar.length; ) {
    const header = tar.subarray(at, at + 512);
    const name = field(header, 0, 100);
    if (name === "") {
      break;
    }
    const prefix = field(header, 345, 155);
    const size = parseInt(field(header, 124, 12).trim() || "0", 8);
    entries.push({
      path: (prefix ? `${prefix}/${name}` : name).replace(/^package\//, ""),
      mode: parseInt(field(header, 100, 8).trim(), 8),
      size,
    });
    at += 512 + Math.ceil(size / 512) * 512;
  }
  return entries;
}
