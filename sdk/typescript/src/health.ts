import { Code, ConnectError } from "@connectrpc/connect";

import { HealthCheckResponse_ServingStatus as ServingStatus, type HealthCheckRequest } from "./gen/grpc/health/v1/health_pb.js";

export { ServingStatus };

/**
 * gRPC's health service (grpc.health.v1.Health): Check, List and Watch. The
 * host waits for Check on the service "" to answer SERVING before it calls
 * Describe, and checks it for its readiness probe.
 *
 * On shutdown every service reports NOT_SERVING and Watch streams end (with
 * UNAVAILABLE, after a last NOT_SERVING), so that a graceful stop waits for
 * the calls that carry work, not for watchers that never hang up.
 */
export class HealthService {
  private readonly statuses = new Map<string, ServingStatus>();
  private changed = signal();
  private stopped = false;

  /** Sets the status of a service ("" is the server as a whole) and wakes its watchers. */
  set(service: string, status: ServingStatus): void {
    if (this.stopped) {
      return;
    }
    this.statuses.set(service, status);
    this.wake();
  }

  /** Reports NOT_SERVING for every service from now on and ends the Watch streams. */
  shutdown(): void {
    for (const service of this.statuses.keys()) {
      this.statuses.set(service, ServingStatus.NOT_SERVING);
    }
    this.stopped = true;
    this.wake();
  }

  private wake() {
    this.changed.resolve();
    this.changed = signal();
  }

  /** The implementation of grpc.health.v1.Health, as Connect's router takes it. */
  readonly service = {
    check: (req: HealthCheckRequest) => {
      const status = this.statuses.get(req.service);
      if (status === undefined) {
        throw new ConnectError(`unknown service ${JSON.stringify(req.service)}`, Code.NotFound);
      }
      return { status };
    },
    list: () => ({
      statuses: Object.fromEntries([...this.statuses].map(([service, status]) => [service, { status }])),
    }),
    watch: (req: HealthCheckRequest, call: { signal: AbortSignal }) => this.watch(req.service, call.signal),
  };

  private async *watch(service: string, signal: AbortSignal) {
    const aborted = new Promise<void>((resolve) => signal.addEventListener("abort", () => resolve(), { once: true }));
    let last: ServingStatus | undefined;
    while (!signal.aborted) {
      const changed = this.changed.promise;
      const status = this.statuses.get(service) ?? ServingStatus.SERVICE_UNKNOWN;
      if (status !== last) {
        yield { status };
        last = status;
      }
      if (this.stopped) {
        if (last !== ServingStatus.NOT_SERVING) {
          yield { status: ServingStatus.NOT_SERVING };
        }
        throw new ConnectError("the sidecar is stopping", Code.Unavailable);
      }
      await Promise.race([changed, aborted]);
    }
  }
}

/** A promise and the function that resolves it. */
function signal(): { promise: Promise<void>; resolve: () => void } {
  let resolve!: () => void;
  const promise = new Promise<void>((r) => (resolve = r));
  return { promise, resolve };
}
