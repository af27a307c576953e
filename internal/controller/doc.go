// Package controller builds controller-runtime controllers from a sidecar's
// self-description.
//
// Each declared controller becomes one controller-runtime controller over
// unstructured objects of the declared kind, with the declared predicates and
// concurrency. Its Reconciler reads the object from the manager's cache, sends
// it to the sidecar in one Reconcile call and carries out the answer: it writes
// the returned status through the status subresource (only when it changed,
// with optimistic concurrency), records the returned events, and maps the
// decision onto controller-runtime's (requeue, requeue after, exponential
// backoff on error, reconcile.TerminalError).
//
// A sidecar that cannot be reached is a transient error: the key stays in the
// workqueue. While the sidecar is down, the backoff of every key is capped (see
// Options.SidecarDownMaxBackoff) so that all pending work converges soon after
// the sidecar returns.
package controller
