/**
 * An AbortSignal aborted on SIGTERM or SIGINT, for Sidecar.serve, as
 * controller-runtime's SetupSignalHandler: the first signal stops the sidecar
 * gracefully, a second one exits at once with status 1.
 */
export function shutdownSignal(): AbortSignal {
  const controller = new AbortController();
  const onSignal = (signal: NodeJS.Signals) => {
    if (controller.signal.aborted) {
      process.exit(1);
    }
    controller.abort(new Error(`received ${signal}`));
  };
  process.on("SIGTERM", onSignal);
  process.on("SIGINT", onSignal);
  return controller.signal;
}
