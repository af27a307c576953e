// Package controller builds controller-runtime controllers from a sidecar's
// self-description.
//
// Each declared controller becomes one controller-runtime controller over
// the objects of the declared kind, held in the cache as object.Objects, with
// the declared predicates and concurrency. Its Reconciler reads the object from the manager's cache, sends
// it to the sidecar in one Reconcile call and carries out the answer: it writes
// the returned status through the status subresource (only when it changed,
// with a JSON patch that replaces the status and carries the object's
// resourceVersion, so a status computed from a stale object is a conflict),
// records the returned events, and maps the
// decision onto controller-runtime's (requeue after, exponential backoff on
// error, reconcile.TerminalError). A failure that says when to retry
// (Failure.retry_after) is retried then instead of after its backoff, and
// still counts as a failure: in controller-runtime's error metrics, in the
// retries the next request carries, and in the backoff of a later failure.
//
// What a controller declares beyond its kind becomes controller-runtime
// machinery too:
//
//   - Owned kinds are watched as with Owns: an event on a child enqueues its
//     controller owner. Every owned kind carries the OwnerIndex cache index, so
//     the observed children (sent to the sidecar for the kinds declared with
//     send_observed) and the children to prune are found without a scan. The
//     desired children the sidecar returns are validated together with its
//     status before anything is written, applied with server-side apply under
//     the controller's field manager with the object as their controller
//     owner and ControllerLabel set, skipped when unchanged, and pruned only
//     when the answer says its set is complete and reports no error. A child
//     never takes over an object another object controls, nor one nobody
//     controls unless its kind declares adoption (claim); prune deletes only
//     children the host applied (appliedByHost); a child refused on an
//     immutable field is reported, or replaced when its kind declares it.
//   - Watches map events on other kinds to reconciled objects by a label, an
//     annotation, or a field path of the reconciled kind kept in a cache index
//     (FieldIndex).
//   - A finalizer is added before the first Reconcile; an object being deleted
//     goes to the sidecar's Finalize, and the finalizer is removed once it
//     succeeds.
//
// A reconcile that follows the host's own write of the object waits for the
// cache to see that write first, so that the sidecar is never handed an older
// object than the host itself wrote.
//
// A sidecar that cannot be reached is a transient error: the key stays in the
// workqueue. While the sidecar is down, the backoff of every key is capped (see
// Options.SidecarDownMaxBackoff) so that all pending work converges soon after
// the sidecar returns.
package controller
