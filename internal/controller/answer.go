package controller

import (
	"errors"
	"fmt"
	"strings"

	"github.com/polyop/polyop/internal/object"
	"github.com/polyop/polyop/internal/sidecar"
)

// The reasons of the Warning events a refused answer records on the object.
const (
	// ReasonInvalidStatus: the status is not a JSON object, or is too large.
	ReasonInvalidStatus = "InvalidStatus"
	// ReasonInvalidDesiredChildren: a desired child is invalid, or too large.
	ReasonInvalidDesiredChildren = "InvalidDesiredChildren"
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
	refused := fmt.Errorf("controller %q refused the Reconcile answer of the sidecar at %s and wrote nothing: %w",
		r.Controller.Name, r.Sidecar.Address(), err)
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
