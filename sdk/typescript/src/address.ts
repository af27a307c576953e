import { lstat, mkdir, rm } from "node:fs/promises";
import { connect } from "node:net";
import { dirname, resolve } from "node:path";

/**
 * Where a sidecar serves unless told otherwise: a unix socket in the volume
 * the host's and the sidecar's containers share. It is also the host's
 * default --sidecar-address.
 */
export const DEFAULT_ADDRESS = "unix:///var/run/polyop/sidecar.sock";

/** An address split into what node's net module listens on or dials. */
export type Endpoint = { readonly path: string } | { readonly host: string; readonly port: number };

/**
 * Parses an address in the forms the host's --sidecar-address flag takes:
 *
 *     unix:///var/run/polyop/sidecar.sock   a unix socket at an absolute path
 *     unix:sidecar.sock                     a unix socket at a relative path
 *     tcp://127.0.0.1:9443                  a TCP address
 *     127.0.0.1:9443, [::1]:9443            a TCP address
 *
 * A relative socket path is made absolute, against the working directory of
 * this process.
 */
export function parseAddress(address: string): Endpoint {
  if (address === "") {
    throw new Error("polyop: the address is empty");
  }
  if (address.startsWith("unix://")) {
    const path = address.slice("unix://".length);
    if (!path.startsWith("/")) {
      throw new Error(
        `polyop: address ${JSON.stringify(address)}: unix:// takes an absolute path (unix:///path/to.sock); use unix:${path} for a relative one`,
      );
    }
    return { path };
  }
  if (address.startsWith("unix:")) {
    const path = address.slice("unix:".length);
    if (path === "") {
      throw new Error(`polyop: address ${JSON.stringify(address)} has no socket path`);
    }
    return { path: resolve(path) };
  }
  let hostPort = address;
  if (address.startsWith("tcp://")) {
    hostPort = address.slice("tcp://".length);
  } else if (address.includes("://")) {
    throw new Error(`polyop: address ${JSON.stringify(address)}: the scheme must be unix or tcp`);
  }
  const match = /^(?:\[([^\]]+)\]|([^:[\]]*)):(\d{1,5})$/.exec(hostPort);
  const port = Number(match?.[3]);
  if (!match || port > 65535) {
    throw new Error(`polyop: address ${JSON.stringify(address)} is neither unix:PATH nor [tcp://]HOST:PORT`);
  }
  return { host: match[1] ?? match[2] ?? "", port };
}

/**
 * Makes a unix socket path ready to listen on: creates its directory and
 * removes a stale socket left by a process that is gone. It refuses to remove
 * anything else: a file that is not a socket, or a socket another process
 * still serves on.
 */
export async function prepareSocket(path: string): Promise<void> {
  await mkdir(dirname(path), { recursive: true });
  let isSocket: boolean;
  try {
    isSocket = (await lstat(path)).isSocket();
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") {
      return;
    }
    throw err;
  }
  if (!isSocket) {
    throw new Error(`polyop: ${path} exists and is not a socket; refusing to remove it`);
  }
  if (await accepts(path)) {
    throw new Error(`polyop: another process is serving on ${path}`);
  }
  await rm(path, { force: true });
}

/** Reports whether something accepts connections on the unix socket path. */
function accepts(path: string): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect({ path });
    const done = (ok: boolean) => {
      socket.destroy();
      resolve(ok);
    };
    socket.setTimeout(1000, () => done(false));
    socket.once("connect", () => done(true));
    socket.once("error", () => done(false));
  });
}
