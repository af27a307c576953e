import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { once } from "node:events";
import { mkdtemp, rm, stat, writeFile } from "node:fs/promises";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, test } from "node:test";

import { parseAddress, prepareSocket } from "./address.js";

describe("parseAddress", () => {
  const cases: Record<string, { address: string; want?: unknown; error?: RegExp }> = {
    "an absolute unix socket path": { address: "unix:///var/run/polyop/sidecar.sock", want: { path: "/var/run/polyop/sidecar.sock" } },
    "a relative unix socket path, made absolute against the working directory": {
      address: "unix:run/../sidecar.sock",
      want: { path: join(process.cwd(), "sidecar.sock") },
    },
    "a tcp:// address": { address: "tcp://127.0.0.1:9443", want: { host: "127.0.0.1", port: 9443 } },
    "a bare host and port": { address: "localhost:9443", want: { host: "localhost", port: 9443 } },
    "an IPv6 host": { address: "[::1]:9443", want: { host: "::1", port: 9443 } },
    "a port alone, on every interface": { address: ":9443", want: { host: "", port: 9443 } },
    "if unix:// has a relative path, then it says how to write one": { address: "unix://sidecar.sock", error: /use unix:sidecar.sock/ },
    "if the scheme is unknown, then it is refused": { address: "http://localhost:80", error: /scheme must be unix or tcp/ },
    "if there is no port, then it is refused": { address: "localhost", error: /neither unix:PATH nor/ },
    "if the port is out of range, then it is refused": { address: "localhost:70000", error: /neither unix:PATH nor/ },
    "if the address is empty, then it is refused": { address: "", error: /empty/ },
    "if unix: has no path, then it is refused": { address: "unix:", error: /no socket path/ },
  };
  for (const [name, c] of Object.entries(cases)) {
    test(name, () => {
      if (c.error) {
        assert.throws(() => parseAddress(c.address), c.error);
      } else {
        assert.deepEqual(parseAddress(c.address), c.want);
      }
    });
  }
});

describe("prepareSocket", () => {
  test("creates the socket's directory", async (t) => {
    const dir = await mkdtemp(join(tmpdir(), "po-"));
    t.after(() => rm(dir, { recursive: true, force: true }));
    await prepareSocket(join(dir, "a", "b", "s.sock"));
    assert.ok((await stat(join(dir, "a", "b"))).isDirectory());
  });

  test("removes a stale socket and refuses a live one or a file", async (t) => {
    const dir = await mkdtemp(join(tmpdir(), "po-"));
    t.after(() => rm(dir, { recursive: true, force: true }));
    const path = join(dir, "s.sock");
    const server = createServer();
    await new Promise<void>((resolve) => server.listen(path, resolve));
    await assert.rejects(prepareSocket(path), /another process is serving/);
    await new Promise<void>((resolve) => server.close(() => resolve()));
    // A socket whose process was killed stays behind as a file.
    const stale = join(dir, "stale.sock");
    const child = spawn(process.execPath, ["-e", `require("node:net").createServer().listen(${JSON.stringify(stale)}, () => console.log("up"))`]);
    await once(child.stdout, "data");
    child.kill("SIGKILL");
    await once(child, "exit");
    assert.ok((await stat(stale)).isSocket());
    await prepareSocket(stale);
    await assert.rejects(stat(stale), { code: "ENOENT" });
    const file = join(dir, "file");
    await writeFile(file, "x");
    await assert.rejects(prepareSocket(file), /not a socket; refusing to remove it/);
  });
});
