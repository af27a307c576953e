#!/usr/bin/env node
// The polyop command of the npm package @polyop/cli. polyop is a Go binary:
// each platform has a package of its own, @polyop/cli-<os>-<cpu>, that holds
// it at bin/polyop and that npm installs only where its os and cpu fields
// match. @polyop/cli lists all of them as optionalDependencies, and this
// launcher finds the one npm installed and runs its binary with the same
// arguments, standard streams and environment, exiting as the binary exits.
//
// POLYOP_BINARY, when set, names the binary to run instead.
//
// It is CommonJS, plain JavaScript for Node.js 20 and later: npm links a
// package's bin into node_modules/.bin (a symlink, or a .cmd shim on Windows
// that reads the #! line), and node runs it from its real path, so that
// require.resolve looks up the platform package from inside @polyop/cli,
// where npm (and pnpm, and yarn) put its optional dependencies.
"use strict";

const childProcess = require("node:child_process");
const fs = require("node:fs");
const os = require("node:os");
const path = require("node:path");

/**
 * The package holding polyop for each platform Node.js reports, keyed by
 * `${process.platform} ${process.arch}`. packaging/npm/build.mjs builds one
 * package for each, and @polyop/cli's optionalDependencies name them all.
 */
const PLATFORM_PACKAGES = Object.freeze({
  "linux x64": "@polyop/cli-linux-x64",
  "linux arm64": "@polyop/cli-linux-arm64",
  "darwin x64": "@polyop/cli-darwin-x64",
  "darwin arm64": "@polyop/cli-darwin-arm64",
});

/** The path of the binary inside a platform package. */
const BINARY_SUBPATH = "bin/polyop";

/** The environment variable naming a polyop binary to run instead of the platform package's. */
const BINARY_ENV = "POLYOP_BINARY";

/** The Go package `go install` builds polyop from. */
const GO_PACKAGE = "github.com/polyop/polyop/cmd/polyop";

/**
 * The signals the launcher passes on to polyop: a process manager or `kill`
 * signals the launcher, the process it started, not polyop.
 */
const FORWARDED_SIGNALS = Object.freeze(["SIGINT", "SIGTERM"]);

/** An error to print for the user, without a stack, before exiting with 1. */
class LaunchError extends Error {
  /** @param {string} message what is wrong and what to do */
  constructor(message) {
    super(message);
    this.name = "LaunchError";
  }
}

/** The version of @polyop/cli, which its platform packages share. */
function cliVersion() {
  try {
    return JSON.parse(fs.readFileSync(path.join(__dirname, "..", "package.json"), "utf8")).version;
  } catch {
    return undefined;
  }
}

/**
 * The platform package for a platform and CPU as Node.js names them
 * (process.platform, process.arch), or undefined when there is none.
 *
 * @param {string} platform
 * @param {string} arch
 * @returns {string | undefined}
 */
function platformPackage(platform, arch) {
  return Object.hasOwn(PLATFORM_PACKAGES, `${platform} ${arch}`) ? PLATFORM_PACKAGES[`${platform} ${arch}`] : undefined;
}

/** The platforms there are packages for, as prose: "linux x64, linux arm64, …". */
function supportedPlatforms() {
  return Object.keys(PLATFORM_PACKAGES).join(", ");
}

/** How to get polyop without npm, for the messages. */
function goInstallHint(version) {
  const at = version && version !== "0.0.0" ? `v${version}` : "latest";
  return `go install ${GO_PACKAGE}@${at}`;
}

/**
 * The path of the polyop binary to run: $POLYOP_BINARY when set, else the
 * binary of this platform's package, looked up from `from` as Node.js looks
 * up a dependency of the module there.
 *
 * @param {object} [options]
 * @param {NodeJS.ProcessEnv} [options.env] the environment (process.env)
 * @param {string} [options.platform] process.platform
 * @param {string} [options.arch] process.arch
 * @param {string} [options.from] the folder to resolve from (this file's)
 * @param {string} [options.version] @polyop/cli's version, for the messages
 * @returns {string}
 * @throws {LaunchError} when there is no binary to run
 */
function findBinary(options = {}) {
  const {
    env = process.env,
    platform = process.platform,
    arch = process.arch,
    from = __dirname,
    version = cliVersion(),
  } = options;
  const override = env[BINARY_ENV];
  if (override) {
    if (!fs.existsSync(override)) {
      throw new LaunchError(
        `${BINARY_ENV} is set to ${override}, which does not exist: point it at a polyop binary, or unset it to run the binary of @polyop/cli's platform package.`,
      );
    }
    return path.resolve(override);
  }

  const pkg = platformPackage(platform, arch);
  if (pkg === undefined) {
    throw new LaunchError(
      [
        `@polyop/cli has no polyop binary for this platform (${platform} ${arch}); it has binaries for ${supportedPlatforms()}.`,
        "",
        "Build polyop for this platform with Go and run it directly:",
        `    ${goInstallHint(version)}`,
        `or set ${BINARY_ENV} to the path of a polyop binary for this launcher to run.`,
      ].join("\n"),
    );
  }
  try {
    return require.resolve(`${pkg}/${BINARY_SUBPATH}`, { paths: [from] });
  } catch (err) {
    if (err?.code !== "MODULE_NOT_FOUND") {
      throw err;
    }
  }
  throw new LaunchError(missingPackageMessage(pkg, platform, arch, version, installedElsewhere(pkg, from)));
}

/**
 * The platform packages other than pkg that are installed where pkg was
 * looked for: node_modules copied from a machine of another platform.
 */
function installedElsewhere(pkg, from) {
  return Object.values(PLATFORM_PACKAGES).filter((other) => {
    if (other === pkg) {
      return false;
    }
    try {
      require.resolve(`${other}/package.json`, { paths: [from] });
      return true;
    } catch {
      return false;
    }
  });
}

/** The message for a platform package npm did not install. */
function missingPackageMessage(pkg, platform, arch, version, others) {
  const lines = [
    `The package ${pkg}, which holds the polyop binary for this platform (${platform} ${arch}), is not installed.`,
    "",
  ];
  if (others.length > 0) {
    lines.push(
      `${others.join(" and ")} ${others.length === 1 ? "is" : "are"} installed instead: node_modules was installed on another platform and copied here`,
      "(into a container, say). Install the dependencies on this machine instead: npm ci.",
      "",
    );
  }
  lines.push(
    `@polyop/cli installs it as an optional dependency, one of its packages for ${supportedPlatforms()}:`,
    "npm leaves optional dependencies out when it installs with --no-optional or --omit=optional (or omit=optional",
    "in .npmrc or npm_config_omit). Install again without them, e.g.:",
    `    npm install --include=optional --save-dev @polyop/cli${version && version !== "0.0.0" ? `@${version}` : ""}`,
    "",
    "Or install polyop with Go and run it directly:",
    `    ${goInstallHint(version)}`,
    `or set ${BINARY_ENV} to the path of a polyop binary for this launcher to run.`,
  );
  return lines.join("\n");
}

/**
 * Whether this process belongs to the foreground process group of its
 * controlling terminal. A Ctrl-C there sends SIGINT to the whole group,
 * polyop included: passing it on would make a second one, which polyop run
 * takes for "stop at once". Linux tells from /proc, other systems through
 * ps(1).
 *
 * @param {string} [platform] process.platform
 * @returns {boolean}
 */
function inTerminalForeground(platform = process.platform) {
  try {
    if (platform === "linux") {
      // /proc/self/stat: pid (comm) state ppid pgrp session tty_nr tpgid …;
      // comm may hold spaces and parentheses, the fields after it do not.
      const stat = fs.readFileSync("/proc/self/stat", "utf8");
      const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      const pgrp = Number(fields[2]);
      const tpgid = Number(fields[5]);
      return tpgid > 0 && tpgid === pgrp;
    }
    const out = childProcess.execFileSync("ps", ["-o", "tpgid=", "-o", "pgid=", "-p", String(process.pid)], {
      encoding: "utf8",
      stdio: ["ignore", "pipe", "ignore"],
    });
    const [tpgid, pgid] = out.trim().split(/\s+/).map(Number);
    return tpgid > 0 && tpgid === pgid;
  } catch {
    return false;
  }
}

/**
 * Runs the binary with args, its standard streams this process's, until it
 * exits; then exits as it did: with its exit code, or killed by the same
 * signal. SIGINT and SIGTERM sent to this process go on to the binary, except
 * a SIGINT from the terminal, which the binary got itself.
 *
 * @param {string} binary
 * @param {string[]} args
 */
function run(binary, args) {
  // The handlers go in before the binary starts: until they do, a signal
  // ends this process by Node.js's default and leaves the binary running.
  let child;
  const forward = (signal) => {
    if (signal === "SIGINT" && inTerminalForeground()) {
      return;
    }
    child.kill(signal);
  };
  for (const signal of FORWARDED_SIGNALS) {
    process.on(signal, forward);
  }
  const stopForwarding = () => {
    for (const signal of FORWARDED_SIGNALS) {
      process.removeListener(signal, forward);
    }
  };
  // A signal's handler runs on the event loop, after spawn has returned.
  child = childProcess.spawn(binary, args, { stdio: "inherit" });
  child.on("error", (err) => {
    stopForwarding();
    const hint =
      err.code === "EACCES"
        ? ` it is not executable: chmod +x ${binary}`
        : err.code === "ENOEXEC"
          ? " it is not a program for this platform"
          : "";
    fail(`could not run ${binary}: ${err.message}${hint ? `;${hint}` : ""}`);
  });
  child.on("exit", (code, signal) => {
    stopForwarding();
    if (signal) {
      exitWithSignal(signal);
    } else {
      process.exitCode = code ?? 1;
    }
  });
}

/**
 * Ends this process by signal, as the binary ended, so that whoever started
 * it (a shell, make, npm) sees the same. A signal whose default action does
 * not end a Node.js process (Node.js ignores SIGPIPE) exits with 128 plus its
 * number instead, as a shell reports it.
 *
 * @param {NodeJS.Signals} signal
 */
function exitWithSignal(signal) {
  try {
    process.kill(process.pid, signal);
  } catch {
    // Not a signal this platform can send: exit with its number below.
  }
  process.exitCode = 128 + (os.constants.signals[signal] ?? 0);
}

/** Prints message as polyop's launcher and makes the process exit with 1. */
function fail(message) {
  process.stderr.write(`polyop (@polyop/cli): ${message}\n`);
  process.exitCode = 1;
}

/** Runs polyop with this process's arguments. */
function main() {
  let binary;
  try {
    binary = findBinary();
  } catch (err) {
    if (err instanceof LaunchError) {
      fail(err.message);
      return;
    }
    throw err;
  }
  run(binary, process.argv.slice(2));
}

module.exports = {
  BINARY_ENV,
  BINARY_SUBPATH,
  FORWARDED_SIGNALS,
  GO_PACKAGE,
  LaunchError,
  PLATFORM_PACKAGES,
  findBinary,
  inTerminalForeground,
  platformPackage,
};

if (require.main === module) {
  main();
}
