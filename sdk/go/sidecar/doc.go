// Package sidecar serves a polyop sidecar written in Go: typed reconcilers,
// registered with a builder in controller-runtime's style, behind the
// polyop.v1alpha1.SidecarService gRPC API that the polyop host calls.
//
// The host owns the cache, the workqueues, leader election and the writes to
// the API server. For every object its workqueue hands out, it sends the object
// as JSON to the sidecar; this package decodes it into the Go type the
// controller was built for, calls the Reconciler, and answers with the
// decision (requeue after, error), the object's status and the events the
// reconciler recorded. The host writes the status and records the events.
//
// A sidecar is a Server with one or more controllers:
//
//	srv, err := sidecar.New(sidecar.Options{Name: "maintenance-operator", Scheme: scheme})
//	if err != nil {
//		return err
//	}
//	err = sidecar.NewControllerManagedBy[*v1.MaintenanceWindow](srv).
//		WithUpdateFilters(sidecar.GenerationChanged).
//		Complete(&MaintenanceWindowReconciler{})
//	if err != nil {
//		return err
//	}
//	return srv.Serve(ctx, sidecar.DefaultAddress)
//
// The builder's type parameter is the reconciled type, as in controller-runtime's
// builder.TypedControllerManagedBy: Go methods cannot take type parameters, so
// the type is named once, at the start, and every later step (For, Complete) is
// checked against it by the compiler. For is optional for types registered in
// the scheme; it is needed for *unstructured.Unstructured, whose prototype
// carries the apiVersion and kind.
//
// What the host learns through Describe is built from these registrations and
// nothing else: the controller's name, the kind (from the scheme), the update
// filters, the label selector, the namespaces and the concurrency.
//
// Inside Reconcile:
//   - the object is a fresh instance decoded from the host's JSON;
//     modify its status in place, and it is sent back when Reconcile returns,
//     also when Reconcile returns an error;
//   - return Result{RequeueAfter: d} to reconcile again after d (Result's
//     deprecated Requeue without RequeueAfter is answered as a failure that
//     says so, retried with backoff);
//   - return TerminalError(err) for an error that retrying cannot fix, and
//     TemporaryError(err, d) for one to retry after d instead of the
//     host's exponential backoff;
//   - RequestFromContext(ctx) gives the controller, kind, key and retry count;
//   - log.FromContext(ctx) (sigs.k8s.io/controller-runtime/pkg/log) gives a
//     logger with the controller, kind, namespace and name;
//   - Recorder(ctx) records Kubernetes events on the object.
//
// A reconciler that also implements DeletionReconciler is called when the host
// reports that the object is gone.
//
// # Deadlines and cancellation
//
// Every call has the host's deadline (its --reconcile-timeout, 30 seconds by
// default), and the context a reconciler gets carries it: ctx.Done() closes
// when the deadline passes, with ctx.Err() context.DeadlineExceeded, or when
// the host cancels the call, with context.Canceled. Pass ctx to everything
// that blocks, and return once it is done: the host discards an answer that
// comes after the deadline (it writes no status and records no events from
// it) and calls the reconciler again for the object at once, so the next call
// redoes the work. On a ReconcileStream, which the Server serves by default
// (Options.ReconcileStream), the call is answered only once the reconciler
// has returned, and the host sends no other call for the object until then:
// a reconciler that ignores ctx holds its object until it returns, or until
// the host gives up after a grace as long as the deadline, cancels the stream
// and logs an error naming the object. Goroutines a reconciler leaves running
// after it returns are not waited for.
//
// # Admission webhooks and conversion
//
// Defaulters and validators are controller-runtime's own admission.Defaulter
// and admission.Validator (aliased here as Defaulter and Validator), and the
// conversion interfaces its conversion.Hub and conversion.Convertible, so the
// webhook code of a kubebuilder project moves into a sidecar unchanged:
//
//	err = sidecar.NewWebhookManagedBy[*v1.MaintenanceWindow](srv).
//		WithDefaulter(&MaintenanceWindowDefaulter{}).
//		WithValidator(&MaintenanceWindowValidator{}).
//		WithOperations(sidecar.Create, sidecar.Update, sidecar.Delete).
//		WithFailurePolicy(sidecar.Fail).
//		Complete()
//
// The host serves them from its webhook server and calls the sidecar's
// Default, Validate and Convert for each request; `host webhooks` prints the
// webhook configurations and CRD conversion stanzas to install. Errors built
// with apierrors.NewInvalid from field errors reach kubectl as the API
// server's own validation errors do; warnings are printed by kubectl. When the
// kind's versions are in the scheme, one of them a Hub and the others
// Convertible, Complete also registers the kind's conversion (or give
// WithConverter a converter, such as conversion.NewHubSpokeConverter).
//
// Package sidecartest (sdk/go/sidecartest) calls a Server's reconcilers,
// webhooks and conversions without a host, through the same code path.
//
// # The module and the protocol
//
// This package is part of the module github.com/polyop/polyop/sdk/go, which
// a sidecar depends on alone, with the generated code of the contract
// (sdk/go/gen). Describe answers ProtocolVersion, the generated enum value of
// the protocol this package speaks, and the SDK's name and version (SDKName,
// SDKVersion), which the host logs. The names of this package and their
// Python and TypeScript counterparts are listed in the repository's
// docs/vocabulary.md.
package sidecar
