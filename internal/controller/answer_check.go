package controller

import (
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/polyop/polyop/internal/sidecar"
	polyopv1alpha1 "github.com/polyop/polyop/sdk/go/gen/polyop/v1alpha1"
)

// CheckAnswer runs the checks a Reconciler makes of a sidecar's
// ReconcileResponse before it writes anything, without a cluster: the sizes
// of the status and desired children (against maxObjectSize, or
// sidecar.DefaultMaxObjectSize when not positive), the Failure, the status (a JSON object) and every desired child (a kind
// the controller owns, a name, the owner's namespace, no other controller
// owner, named once). owner is the reconciled object, with its kind set;
// controller is the controller's name and kinds the kinds it owns, resolved.
//
// It returns the desired children as the host would apply them (namespace
// defaulted, server-set metadata and status dropped, owner reference and
// ControllerLabel set), or the error the host would refuse the answer with:
// all of the problems, joined. `polyop render` calls it, so that what it
// prints is an answer the host accepts.
func CheckAnswer(resp *polyopv1alpha1.ReconcileResponse, owner client.Object, controller string, kinds []ChildKind, maxObjectSize int) ([]*unstructured.Unstructured, error) {
	if maxObjectSize <= 0 {
		maxObjectSize = sidecar.DefaultMaxObjectSize
	}
	if err := sidecar.CheckSizes(resp, maxObjectSize); err != nil {
		return nil, err
	}
	var errs []error
	if err := checkFailure(resp.GetError()); err != nil {
		errs = append(errs, err)
	}
	if status := resp.GetStatus(); len(status) > 0 {
		if err := checkStatus(status); err != nil {
			errs = append(errs, err)
		}
	}
	desired, err := validateChildren(resp.GetDesiredChildren(), owner, controller, kinds)
	if err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("the host would refuse this answer and write nothing: %w", err)
	}
	out := make([]*unstructured.Unstructured, 0, len(desired))
	for _, d := range desired {
		u, err := d.object()
		if err != nil {
			return nil, err
		}
		out = append(out, u)
	}
	return out, nil
}
