// Package v1 is the conformance operator's webhooks for Crew at v1, written
// as kubebuilder scaffolds them for controller-runtime: it imports nothing of
// polyop.
package v1

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation/field"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	v1 "github.com/polyop/polyop/test/conformance/indexsidecar/api/v1"
)

const (
	// DefaultImage is the image of a Crew that names none.
	DefaultImage = "busybox:1.36"
	// MaxSize is the largest spec.size.
	MaxSize = 5
)

// SetupCrewWebhookWithManager registers the webhook for Crew in the manager.
func SetupCrewWebhookWithManager(mgr ctrl.Manager) error {
	return ctrl.NewWebhookManagedBy(mgr, &v1.Crew{}).
		WithDefaulter(&CrewCustomDefaulter{}).
		WithValidator(&CrewCustomValidator{}).
		Complete()
}

// +kubebuilder:webhook:path=/mutate-conformance-polyop-dev-v1-crew,mutating=true,failurePolicy=fail,sideEffects=None,groups=conformance.polyop.dev,resources=crews,verbs=create;update,versions=v1,name=mcrew-v1.kb.io,admissionReviewVersions=v1

// CrewCustomDefaulter sets the defaults of a Crew.
type CrewCustomDefaulter struct{}

var _ admission.Defaulter[*v1.Crew] = &CrewCustomDefaulter{}

// Default sets spec.size to 1 and spec.image to DefaultImage when they are
// missing.
func (d *CrewCustomDefaulter) Default(_ context.Context, crew *v1.Crew) error {
	if crew.Spec.Size == nil {
		crew.Spec.Size = new(int32(1))
	}
	if crew.Spec.Image == "" {
		crew.Spec.Image = DefaultImage
	}
	return nil
}

// +kubebuilder:webhook:path=/validate-conformance-polyop-dev-v1-crew,mutating=false,failurePolicy=fail,sideEffects=None,groups=conformance.polyop.dev,resources=crews,verbs=create;update,versions=v1,name=vcrew-v1.kb.io,admissionReviewVersions=v1

// CrewCustomValidator checks a Crew's spec.
type CrewCustomValidator struct{}

var _ admission.Validator[*v1.Crew] = &CrewCustomValidator{}

// ValidateCreate checks the spec of a new Crew.
func (v *CrewCustomValidator) ValidateCreate(_ context.Context, crew *v1.Crew) (admission.Warnings, error) {
	return nil, validateCrew(crew)
}

// ValidateUpdate checks the spec of a changed Crew.
func (v *CrewCustomValidator) ValidateUpdate(_ context.Context, _, crew *v1.Crew) (admission.Warnings, error) {
	return nil, validateCrew(crew)
}

// ValidateDelete accepts every deletion.
func (v *CrewCustomValidator) ValidateDelete(_ context.Context, _ *v1.Crew) (admission.Warnings, error) {
	return nil, nil
}

// validateCrew refuses a size out of 1..MaxSize, as a 422 Invalid with the
// field's cause.
func validateCrew(crew *v1.Crew) error {
	var errs field.ErrorList
	if size := crew.Spec.Size; size != nil && (*size < 1 || *size > MaxSize) {
		errs = append(errs, field.Invalid(field.NewPath("spec", "size"), *size, fmt.Sprintf("must be between 1 and %d", MaxSize)))
	}
	if len(errs) == 0 {
		return nil
	}
	return apierrors.NewInvalid(v1.GroupVersion.WithKind("Crew").GroupKind(), crew.Name, errs)
}
