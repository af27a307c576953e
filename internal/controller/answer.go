package controller

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/polyop/polyop/internal/object"
	"github.com/polyop/polyop/internal/sidecar"
	polyopv1alpha1 "github.com/polyop/polyop/sdk/go/gen/polyop/v1alpha1"
)

// The reasons of the Warning events a refused answer records on the object.
const (
	// ReasonInvalidStatus: the status is not a JSON object, or is too large.
	ReasonInvalidStatus = "InvalidStatus"
	// ReasonInvalidDesiredChildren: a desired child is invalid, or too large.
	ReasonInvalidDesiredChildren = "InvalidDesiredChildren"
	// ReasonInvalidFailure: the error (a Failure) contradicts itself, or its
	// retry_after is not a valid duration.
	ReasonInvalidFailure = "InvalidFailure"
)

// The reasons of the Warning events that carry a Failure's message.
const (
	// ReasonReconcileFailed: the sidecar's Reconcile answered a Failure.
	ReasonReconcileFailed = "ReconcileFailed"
	// ReasonFinalizeFailed: the sidecar's Finalize answered a Failure.
	ReasonFinalizeFailed = "FinalizeFailed"
)

// maxObjectSize is MaxObjectSize, defaulted.
func (r *Reconciler) maxObjectSize() int {
	if r.MaxObjectSize > 0 {
		return r.MaxObjectSize
	}
	return sidecar.DefaultMaxObjectSize
}

// refuseAnswer records a Warning event on obj for an answer of the sidecar
// the host refuses (err says why; reason is the event's), and returns the
// reconcile error, which names the object, the controller and the sidecar.
// Nothing of a refused answer is written.
func (r *Reconciler) refuseAnswer(obj *object.Object, reason string, err error) error {
	return r.refuseCallAnswer(obj, "Reconcile", reason, err)
}

// refuseCallAnswer is refuseAnswer for the answer of call (Reconcile or
// Finalize).
func (r *Reconciler) refuseCallAnswer(obj *object.Object, call, reason string, err error) error {
	refused := fmt.Errorf("controller %q refused the %s answer of the sidecar at %s and wrote nothing: %w",
		r.Controller.Name, call, r.Sidecar.Address(), err)
	r.recordWarning(obj, reason, refused.Error())
	if obj.GetNamespace() == "" {
		return fmt.Errorf("%s %q: %w", r.Controller.GVK.Kind, obj.GetName(), refused)
	}
	return fmt.Errorf("%s %s/%s: %w", r.Controller.GVK.Kind, obj.GetNamespace(), obj.GetName(), refused)
}

// refuseTooLarge refuses an answer whose status or desired children are too
// large (err holds a sidecar.TooLargeError for each): one event for the
// status, one for the children.
func (r *Reconciler) refuseTooLarge(obj *object.Object, err error) error {
	var status, children []error
	for _, e := range unjoin(err) {
		var tooLarge *sidecar.TooLargeError
		if errors.As(e, &tooLarge) && strings.HasPrefix(tooLarge.Field, "desired_children") {
			children = append(children, e)
		} else {
			status = append(status, e)
		}
	}
	var errs []error
	if len(status) > 0 {
		errs = append(errs, r.refuseAnswer(obj, ReasonInvalidStatus, errors.Join(status...)))
	}
	if len(children) > 0 {
		errs = append(errs, r.refuseAnswer(obj, ReasonInvalidDesiredChildren, errors.Join(children...)))
	}
	return errors.Join(errs...)
}

// unjoin returns the errors errors.Join joined into err, or err alone.
func unjoin(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

// sidecarFailure is the reconcile error of a Failure the sidecar answered.
type sidecarFailure struct {
	message string
	// retryAfter is Failure.retry_after when positive; zero retries with the
	// controller's backoff.
	retryAfter time.Duration
}

func (e *sidecarFailure) Error() string {
	if e.retryAfter > 0 {
		return fmt.Sprintf("the sidecar reported: %s (retry after %s)", e.message, e.retryAfter)
	}
	return "the sidecar reported: " + e.message
}

// checkFailure refuses a Failure that cannot be followed: terminal with a
// retry_after (never retried, and retried after a while), or a retry_after
// that is not a valid duration.
func checkFailure(f *polyopv1alpha1.Failure) error {
	d := f.GetRetryAfter()
	if d == nil {
		return nil
	}
	if err := d.CheckValid(); err != nil {
		return fmt.Errorf("error.retry_after is not a valid duration: %w", err)
	}
	if f.GetTerminal() && d.AsDuration() > 0 {
		return fmt.Errorf("error is terminal (never retried) and has a retry_after of %s (retried then): it must be one or the other", d.AsDuration())
	}
	return nil
}

// recordFailure records a Warning event on obj with the message of the
// Failure the sidecar answered, if any.
func (r *Reconciler) recordFailure(obj *object.Object, reason string, f *polyopv1alpha1.Failure) {
	if f != nil {
		r.recordWarning(obj, reason, f.GetMessage())
	}
}

// scheduleRetry tells the rate limiter when to retry req after a reconcile
// that failed with a Failure.retry_after. controller-runtime still sees the
// error: it counts it in its metrics, logs it and requeues req rate-limited,
// and the rate limiter answers retry_after for that requeue while it counts
// the failure in req's backoff as any other (see rateLimiter.When).
func (r *Reconciler) scheduleRetry(req reconcile.Request, err error) {
	if err == nil {
		return
	}
	var f *sidecarFailure
	if r.limiter == nil || !errors.As(err, &f) || f.retryAfter <= 0 || errors.Is(err, reconcile.TerminalError(nil)) {
		return
	}
	r.limiter.retryAfter(req, f.retryAfter)
}
