package v1

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"

	v1 "github.com/polyop/polyop/examples/go/maintenancewindow/api/v1"
	"github.com/polyop/polyop/sdk/go/sidecar"
)

// Defaults and limits.
const (
	// DefaultDuration is the duration of a window that gives none.
	DefaultDuration = "1h"
	// TeamLabel names the team a window belongs to.
	TeamLabel = "examples.polyop.dev/team"
	// DefaultTeam is the team of a window that names none.
	DefaultTeam = "unassigned"
	// ProtectedAnnotation, set to "true", refuses the window's deletion.
	ProtectedAnnotation = "examples.polyop.dev/protected"
	// MinDuration and MaxDuration bound spec.duration.
	MinDuration = time.Minute
	MaxDuration = 24 * time.Hour
)

var groupKind = schema.GroupKind{Group: v1.GroupVersion.Group, Kind: "MaintenanceWindow"}

// SetupWithServer registers the MaintenanceWindow webhooks on srv: defaulting,
// and validation of creates, updates and deletes. The API server calls them at
// v1; v1beta1 objects reach them converted, through the conversion the
// builder registers because v1 is a hub and v1beta1 converts to it.
func SetupWithServer(srv *sidecar.Server) error {
	return sidecar.NewWebhookManagedBy[*v1.MaintenanceWindow](srv).
		WithDefaulter(&Defaulter{}).
		WithValidator(&Validator{}).
		WithOperations(sidecar.Create, sidecar.Update, sidecar.Delete).
		Complete()
}

// Defaulter sets a window's defaults.
type Defaulter struct{}

var _ sidecar.Defaulter[*v1.MaintenanceWindow] = (*Defaulter)(nil)

// Default sets spec.duration to DefaultDuration and the TeamLabel to
// DefaultTeam when they are missing.
func (d *Defaulter) Default(_ context.Context, mw *v1.MaintenanceWindow) error {
	if mw.Spec.Duration == "" {
		mw.Spec.Duration = DefaultDuration
	}
	if _, ok := mw.Labels[TeamLabel]; !ok {
		if mw.Labels == nil {
			mw.Labels = map[string]string{}
		}
		mw.Labels[TeamLabel] = DefaultTeam
	}
	return nil
}

// Validator checks a window's spec and guards its deletion.
type Validator struct{}

var _ sidecar.Validator[*v1.MaintenanceWindow] = (*Validator)(nil)

// ValidateCreate checks the spec.
func (v *Validator) ValidateCreate(_ context.Context, mw *v1.MaintenanceWindow) (sidecar.Warnings, error) {
	return warnings(mw), invalid(mw, validateSpec(mw.Spec))
}

// ValidateUpdate checks the spec, and that spec.start did not change.
func (v *Validator) ValidateUpdate(_ context.Context, old, mw *v1.MaintenanceWindow) (sidecar.Warnings, error) {
	errs := validateSpec(mw.Spec)
	if mw.Spec.Start != old.Spec.Start {
		errs = append(errs, field.Invalid(field.NewPath("spec", "start"), mw.Spec.Start,
			"field is immutable: it anchors every future window; create a new MaintenanceWindow instead"))
	}
	return warnings(mw), invalid(mw, errs)
}

// ValidateDelete refuses to delete a protected window.
func (v *Validator) ValidateDelete(_ context.Context, mw *v1.MaintenanceWindow) (sidecar.Warnings, error) {
	if mw.Annotations[ProtectedAnnotation] == "true" {
		return nil, fmt.Errorf("MaintenanceWindow %s/%s is protected: remove the annotation %s to delete it",
			mw.Namespace, mw.Name, ProtectedAnnotation)
	}
	return nil, nil
}

// validateSpec reports every problem of a spec.
func validateSpec(spec v1.MaintenanceWindowSpec) field.ErrorList {
	var errs field.ErrorList
	path := field.NewPath("spec")
	if _, err := time.Parse(time.RFC3339, spec.Start); err != nil {
		errs = append(errs, field.Invalid(path.Child("start"), spec.Start, "must be an RFC 3339 time, such as 2026-01-01T00:00:00Z"))
	}
	duration, err := time.ParseDuration(spec.Duration)
	switch {
	case err != nil:
		errs = append(errs, field.Invalid(path.Child("duration"), spec.Duration, "must be a duration, such as 2h or 90m"))
	case duration < MinDuration || duration > MaxDuration:
		errs = append(errs, field.Invalid(path.Child("duration"), spec.Duration,
			fmt.Sprintf("must be between %s and %s", formatDuration(MinDuration), formatDuration(MaxDuration))))
	}
	if spec.Every != "" {
		every, err := time.ParseDuration(spec.Every)
		switch {
		case err != nil:
			errs = append(errs, field.Invalid(path.Child("every"), spec.Every, "must be a duration, such as 24h"))
		case duration > 0 && every < duration:
			errs = append(errs, field.Invalid(path.Child("every"), spec.Every,
				fmt.Sprintf("must not be shorter than spec.duration (%s): windows would overlap", spec.Duration)))
		}
	}
	return errs
}

func warnings(mw *v1.MaintenanceWindow) sidecar.Warnings {
	if mw.Spec.Paused {
		return sidecar.Warnings{"spec.paused is set: no window opens until it is unset"}
	}
	return nil
}

// invalid is the error for errs, nil when there are none.
func invalid(mw *v1.MaintenanceWindow, errs field.ErrorList) error {
	if len(errs) == 0 {
		return nil
	}
	return apierrors.NewInvalid(groupKind, mw.Name, errs)
}

// formatDuration prints 24h0m0s as 24h and 1m0s as 1m.
func formatDuration(d time.Duration) string {
	switch {
	case d%time.Hour == 0:
		return fmt.Sprintf("%dh", d/time.Hour)
	case d%time.Minute == 0:
		return fmt.Sprintf("%dm", d/time.Minute)
	}
	return d.String()
}
