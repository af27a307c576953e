// The Cluster service's Watch stream as an async iterable of typed events,
// resumed by itself: the TypeScript counterpart of the Go SDK's
// client.Client.Watch.
import { setTimeout as sleep } from "node:timers/promises";

import type { MessageInitShape } from "@bufbuild/protobuf";
import { Code } from "@connectrpc/connect";

import { clusterError } from "./errors.js";
import { WatchEventType, type WatchRequestSchema, type WatchResponse } from "./gen/polyop/v1alpha1/cluster_pb.js";
import { discardLogger, type Logger } from "./log.js";
import { decodeJSON, gvkOf, keyOf, type KubeResource, type Manifest, type TypeMeta } from "./objects.js";

/**
 * One event of a watch: an object "added" (also each object of the initial
 * list), "modified" or "deleted" (the object went, or left the selection;
 * object is its last state), or "synced": every object the host held when
 * the watch listed (or listed again) has been delivered, so a view built
 * from the events is complete.
 */
export type WatchEvent<T extends Manifest = KubeResource> =
  | { type: "added" | "modified" | "deleted"; object: T }
  | { type: "synced" };

/** What to watch, and until when. */
export interface WatchOptions {
  /** Only objects in this namespace; every namespace the host caches the kind in when absent. */
  namespace?: string;
  /** A label selector in kubectl's -l syntax, for example "app=web,tier!=cache". */
  labelSelector?: string;
  /** A field selector on metadata.name or metadata.namespace only (=, ==, !=), for example "metadata.name=settings". */
  fieldSelector?: string;
  /**
   * Ends the watch when aborted: the loop over it ends (without an error)
   * and the stream is cancelled. Defaults to the client's signal (inside a
   * reconcile, ctx.cluster's is the reconcile's), else none: the watch runs
   * until the loop breaks or the client is closed (Sidecar.serve closes its
   * client when it stops).
   */
  signal?: AbortSignal;
}

/** Opens one Watch stream: the request, and the signal that cancels it. */
export type WatchOpener = (request: MessageInitShape<typeof WatchRequestSchema>, signal: AbortSignal) => AsyncIterable<WatchResponse>;

/**
 * The wait between two attempts of a stream the host ended (it restarted, or
 * the reader fell behind) or that could not be opened: it doubles from the
 * first to the second, and starts again from the first once a stream
 * delivered something. As the Go SDK's.
 */
export const watchRetryMs: readonly [number, number] = [100, 5_000];

/** Codes a watch does not get past by watching again. */
const terminal = new Set([Code.InvalidArgument, Code.NotFound, Code.PermissionDenied, Code.Unauthenticated, Code.Unimplemented]);

/**
 * Watches the objects of type through open, attempt after attempt: first the
 * objects the host holds, each "added", then "synced", then every change.
 * After an interruption it resumes from the last resource version it saw; when
 * the host no longer remembers it (FAILED_PRECONDITION, "expired"), it lists
 * again, delivering "added" or "modified" for every object and "deleted" for
 * the objects delivered before that went meanwhile, then "synced" again. An
 * error it cannot get past (the host does not cache the kind, a selector it
 * refuses) is thrown as a ClusterError. Breaking out of the loop, or aborting
 * options.signal, cancels the stream.
 */
export async function* watchEvents<T extends Manifest = KubeResource>(
  open: WatchOpener,
  type: TypeMeta,
  options: WatchOptions = {},
  log: Logger = discardLogger,
): AsyncGenerator<WatchEvent<T>, void, undefined> {
  const stop = new AbortController();
  const signal = options.signal ? AbortSignal.any([options.signal, stop.signal]) : stop.signal;
  const what = `watching ${type.kind}${options.namespace ? ` in namespace ${options.namespace}` : ""}`;
  const request = {
    kind: gvkOf(type),
    namespace: options.namespace ?? "",
    labelSelector: options.labelSelector ?? "",
    fieldSelector: options.fieldSelector ?? "",
  };
  // The objects delivered and not deleted, by namespace/name, so that a new
  // list can report those that went while the watch was away.
  const known = new Map<string, { namespace: string | undefined; name: string }>();
  // The version to resume from; "" to list.
  let rv = "";
  let wait = watchRetryMs[0];
  try {
    while (!signal.aborted) {
      let listing = rv === "";
      const listed = new Set<string>();
      let progressed = false;
      try {
        for await (const resp of open({ ...request, resourceVersion: rv }, signal)) {
          progressed = true;
          switch (resp.type) {
            case WatchEventType.BOOKMARK:
              break;
            case WatchEventType.INITIAL_LIST_DONE:
              if (listing) {
                for (const [id, key] of known) {
                  if (!listed.has(id)) {
                    known.delete(id);
                    const gone = { apiVersion: type.apiVersion, kind: type.kind, metadata: { ...(key.namespace ? { namespace: key.namespace } : {}), name: key.name } };
                    yield { type: "deleted", object: gone as T };
                  }
                }
              }
              listing = false;
              yield { type: "synced" };
              break;
            case WatchEventType.ADDED:
            case WatchEventType.MODIFIED:
            case WatchEventType.DELETED: {
              const object = decodeJSON<T>(resp.object);
              const key = keyOf(object);
              const id = `${key.namespace ?? ""}/${key.name}`;
              if (resp.type === WatchEventType.DELETED) {
                known.delete(id);
                yield { type: "deleted", object };
                break;
              }
              const seen = known.has(id);
              known.set(id, { namespace: key.namespace, name: key.name });
              listed.add(id);
              yield { type: seen ? "modified" : "added", object };
              break;
            }
          }
          // While listing, the versions are the objects' own: only the end
          // of the list says where the stream stands, so an interrupted list
          // is listed again rather than resumed from its middle.
          if (resp.resourceVersion && !listing) {
            rv = resp.resourceVersion;
          }
        }
        log.debug("The watch ended, resuming", { kind: type.kind, namespace: options.namespace, resourceVersion: rv });
      } catch (err) {
        if (signal.aborted) {
          return;
        }
        const e = clusterError(err, what);
        if (e.code === Code.FailedPrecondition && rv !== "") {
          // Expired: the host no longer remembers rv. List again, now.
          log.debug("The watch's resource version expired, listing again", { kind: type.kind, namespace: options.namespace, resourceVersion: rv });
          rv = "";
          continue;
        }
        if (e.code === Code.FailedPrecondition || terminal.has(e.code)) {
          throw e;
        }
        log.debug("The watch ended, resuming", { kind: type.kind, namespace: options.namespace, resourceVersion: rv, error: e.message });
      }
      if (progressed) {
        wait = watchRetryMs[0];
      }
      try {
        await sleep(wait, undefined, { signal });
      } catch {
        return; // aborted
      }
      wait = Math.min(2 * wait, watchRetryMs[1]);
    }
  } finally {
    // Breaking out of the loop (or an error) ends the stream in flight.
    stop.abort();
  }
}
