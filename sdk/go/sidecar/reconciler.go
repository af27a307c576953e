package sidecar

import (
	"context"
	"errors"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// Result is the outcome of a successful reconcile, controller-runtime's own:
// RequeueAfter asks the host to reconcile the object again after that long.
type Result = reconcile.Result

// Reconciler drives one object of type T towards its desired state.
//
// The object is decoded from the host's JSON into a fresh T for every call;
// changes to its status are sent back to the host, which writes them through
// the status subresource. Changes to anything else are ignored: a sidecar
// changes other objects, or the object's spec, through the API server.
//
// Reconcile must be idempotent: the host may call it any number of times for
// the same object. Calls for different objects may be concurrent; calls for
// the same object never overlap.
type Reconciler[T client.Object] interface {
	Reconcile(ctx context.Context, obj T) (Result, error)
}

// ReconcilerFunc adapts a function to a Reconciler.
type ReconcilerFunc[T client.Object] func(ctx context.Context, obj T) (Result, error)

// Reconcile calls f(ctx, obj).
func (f ReconcilerFunc[T]) Reconcile(ctx context.Context, obj T) (Result, error) {
	return f(ctx, obj)
}

// DeletionReconciler is implemented by a Reconciler that wants to be told when
// its object is gone (the host no longer finds it in its cache). Without it,
// such a request is answered with an empty response.
//
// There is no object to decode, so it receives the Request instead. Status and
// events are meaningless for an object that is gone; errors and requeues are
// honoured.
type DeletionReconciler interface {
	ReconcileDeleted(ctx context.Context, req Request) (Result, error)
}

// TerminalError wraps err so that the host does not retry the object: it waits
// for the object's next event, as with controller-runtime's
// reconcile.TerminalError (which this is). Use it for errors that retrying
// cannot fix, such as an invalid spec.
func TerminalError(err error) error {
	return reconcile.TerminalError(err)
}

// TemporaryError wraps err so that the host retries the object after the
// duration after instead of its exponential backoff (the response's
// Failure.retry_after), as Kopf's TemporaryError(delay=...) does. Use it when
// the reconciler knows when retrying makes sense, such as an external API
// that answered "retry in 30 s". The failure still counts: Request.Retries
// grows, and a later failure without a delay backs off as if every failure
// had. An after of zero or less retries with the backoff, as err alone would.
//
// Like TerminalError, it survives wrapping (fmt.Errorf("...: %w", ...)):
// errors.Is(err, TemporaryError(nil, 0)) reports whether err is one, and
// errors.As into an interface{ RetryAfter() time.Duration } reads its delay.
// An error that is both terminal and temporary is terminal: it is not
// retried.
func TemporaryError(err error, after time.Duration) error {
	return &temporaryError{err: err, after: after}
}

type temporaryError struct {
	err   error
	after time.Duration
}

func (e *temporaryError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("nil temporary error (retry after %s)", e.after)
	}
	return e.err.Error()
}

func (e *temporaryError) Unwrap() error { return e.err }

// RetryAfter is when the host retries the object.
func (e *temporaryError) RetryAfter() time.Duration { return e.after }

// Is makes every TemporaryError match TemporaryError(nil, 0), whatever it
// wraps, as reconcile.TerminalError does.
func (e *temporaryError) Is(target error) bool {
	var t *temporaryError
	return errors.As(target, &t)
}

// Request describes the reconcile in progress. RequestFromContext returns it.
type Request struct {
	// Controller is the name of the controller, as registered.
	Controller string
	// Kind is the kind of the object.
	Kind schema.GroupVersionKind
	// NamespacedName is the object's namespace (empty for a cluster-scoped kind)
	// and name.
	types.NamespacedName
	// Retries is how many times in a row this object has failed and been
	// retried; 0 on a first attempt and after a success.
	Retries int
}

type requestKey struct{}

// RequestFromContext returns the Request of the reconcile ctx belongs to, and
// false outside a reconcile.
func RequestFromContext(ctx context.Context) (Request, bool) {
	req, ok := ctx.Value(requestKey{}).(Request)
	return req, ok
}

func withRequest(ctx context.Context, req Request) context.Context {
	return context.WithValue(ctx, requestKey{}, req)
}
