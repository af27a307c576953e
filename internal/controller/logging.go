package controller

import (
	"errors"
	"fmt"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/polyop/polyop/internal/sidecar"
)

// reconcilerErrorMessage is the message controller-runtime logs, at error
// level, for every error a Reconciler returns (pkg/internal/controller).
const reconcilerErrorMessage = "Reconciler error"

// unreachableError is a call that found the sidecar unreachable: an
// expected condition, retried with backoff, which the host logs once per
// change of state (see sidecarState) rather than once per retry.
type unreachableError struct{ error }

func (e *unreachableError) Unwrap() error { return e.error }

// callFailed is the reconcile error of a call (Reconcile or Finalize) that
// failed; an unreachable sidecar is recorded in the shared state, which logs
// it when it was reachable until now. A call that ran out of time is its
// object's failure (a *sidecar.DeadlineError, which names the object, the
// controller, the call and the deadline): it says nothing about the
// sidecar's other calls. A call not made because the object is in flight
// (a *sidecar.InFlightError) is no failure at all (see settle).
func (r *Reconciler) callFailed(log logr.Logger, call string, err error) error {
	err = fmt.Errorf("%s call to the sidecar at %s: %w", call, r.Sidecar.Address(), err)
	if !sidecar.IsUnavailable(err) {
		return err
	}
	r.state.markDown(log, err)
	return &unreachableError{err}
}

// callAnswered records that the sidecar answered a call, which logs its
// return when it was unreachable until now.
func (r *Reconciler) callAnswered(log logr.Logger) {
	r.state.markUp(log)
	// The sidecar answers: whatever waits for it can be called.
	r.state.wakeAll()
}

// markDown records that the sidecar is unreachable, and logs it if it was
// not already.
func (s *sidecarState) markDown(log logr.Logger, err error) {
	if !s.down.Swap(true) {
		log.Info("sidecar unreachable; every object is retried with backoff until it answers", "error", err.Error())
	}
}

// markUp records that the sidecar answered, and logs it if it was
// unreachable.
func (s *sidecarState) markUp(log logr.Logger) {
	if s.down.Swap(false) {
		log.Info("sidecar reachable again")
	}
}

// logConstructor is a controller's LogConstructor: the logger the builder
// would make (controller, controllerGroup, controllerKind, the object's
// reference, namespace and name), with kind beside them, the key the SDKs
// log the kind with, except that the
// "Reconciler error" controller-runtime logs for every error a reconcile
// returns goes to the debug level for an unreachable sidecar. The host logs
// that once per change of state; the retries still count in
// controller_runtime_reconcile_errors_total and back off as any error does.
func logConstructor(base logr.Logger, name string, gvk schema.GroupVersionKind) func(*reconcile.Request) logr.Logger {
	base = base.WithValues("controller", name, "controllerGroup", gvk.Group, "controllerKind", gvk.Kind, "kind", gvk.Kind)
	return func(req *reconcile.Request) logr.Logger {
		log := base
		if req != nil {
			log = log.WithValues(gvk.Kind, klog.KRef(req.Namespace, req.Name), "namespace", req.Namespace, "name", req.Name)
		}
		sink := log.GetSink()
		if sink == nil {
			return log
		}
		// The filter is one more frame between the caller and the sink.
		if d, ok := sink.(logr.CallDepthLogSink); ok {
			sink = d.WithCallDepth(1)
		}
		return logr.New(quietUnreachable{sink})
	}
}

// quietUnreachable is a logr.LogSink that logs controller-runtime's
// "Reconciler error" for an unreachableError at V(1), and everything else as
// its inner sink does.
type quietUnreachable struct{ logr.LogSink }

// Init does nothing: the inner sink was initialized by its own logger.
func (quietUnreachable) Init(logr.RuntimeInfo) {}

func (s quietUnreachable) Error(err error, msg string, keysAndValues ...any) {
	var unreachable *unreachableError
	if msg == reconcilerErrorMessage && errors.As(err, &unreachable) {
		if s.Enabled(1) {
			s.Info(1, msg, append(keysAndValues, "error", err.Error())...)
		}
		return
	}
	s.LogSink.Error(err, msg, keysAndValues...)
}

func (s quietUnreachable) WithValues(keysAndValues ...any) logr.LogSink {
	return quietUnreachable{s.LogSink.WithValues(keysAndValues...)}
}

func (s quietUnreachable) WithName(name string) logr.LogSink {
	return quietUnreachable{s.LogSink.WithName(name)}
}

func (s quietUnreachable) WithCallDepth(depth int) logr.LogSink {
	if d, ok := s.LogSink.(logr.CallDepthLogSink); ok {
		return quietUnreachable{d.WithCallDepth(depth)}
	}
	return s
}
