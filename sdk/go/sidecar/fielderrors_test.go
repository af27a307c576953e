package sidecar

import (
	"errors"
	"fmt"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"

	polyopv1alpha1 "github.com/polyop/polyop/sdk/go/gen/polyop/v1alpha1"
)

// The field errors a validator may return, each as apierrors.NewInvalid
// renders it.
var sampleFieldErrors = field.ErrorList{
	field.Invalid(field.NewPath("spec", "start"), "2026-01-01T00:00:00Z: late", "must be earlier"),
	field.Invalid(field.NewPath("spec", "replicas"), int64(-1), "must not be negative"),
	field.Invalid(field.NewPath("spec", "ratio"), 1.5, "must be at most 1"),
	field.Invalid(field.NewPath("spec", "ports"), []int{80, 443}, "must hold one port"),
	field.Invalid(field.NewPath("spec", "selector"), map[string]string{"app": "web: front"}, "must select something"),
	field.Invalid(field.NewPath("spec", "enabled"), true, ""),
	field.Required(field.NewPath("spec", "name"), "a name is needed"),
	field.Required(field.NewPath("spec", "other"), ""),
	field.NotSupported(field.NewPath("spec", "mode"), "fast", []string{"slow", "steady"}),
	field.Forbidden(field.NewPath("spec", "secret"), "may not be set here"),
	field.Duplicate(field.NewPath("spec", "items").Index(2), "a"),
	field.TooLong(field.NewPath("metadata", "name"), "xxxxxxxx", 4),
	field.TooMany(field.NewPath("spec", "items"), 9, 8),
	field.NotFound(field.NewPath("spec", "ref"), "missing"),
	field.InternalError(field.NewPath("spec"), errors.New("oops")),
	field.TooShort(field.NewPath("spec", "code"), "ab", 3),
	field.TypeInvalid(field.NewPath("spec", "count"), "three", "must be an integer"),
	field.Invalid(field.NewPath("spec", "omitted"), field.OmitValueType{}, "without the value"),
}

// render is what the host does with a wire field error, in
// internal/admission: decode the bad value and render the field.Error.
func render(fe *polyopv1alpha1.FieldError) string {
	var bad any = field.OmitValueType{}
	if len(fe.GetBadValue()) > 0 {
		var v any
		if err := decodeJSON(fe.GetBadValue(), &v); err == nil {
			bad = v
		}
	}
	var t field.ErrorType
	for ft, pt := range fieldErrorTypes {
		if pt == fe.GetType() {
			t = ft
		}
	}
	return (&field.Error{Type: t, Field: fe.GetField(), BadValue: bad, Detail: fe.GetDetail()}).Error()
}

func TestDenialOfKeepsEveryFieldErrorsText(t *testing.T) {
	t.Parallel()
	gk := schema.GroupKind{Group: "example.com", Kind: "Widget"}
	for name, err := range map[string]error{
		"if the error is apierrors.NewInvalid, then its causes are the field errors": apierrors.NewInvalid(gk, "w", sampleFieldErrors),
		"if the error wraps apierrors.NewInvalid, then it is unwrapped":              fmt.Errorf("validating: %w", apierrors.NewInvalid(gk, "w", sampleFieldErrors)),
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			d := denialOf(err)
			if len(d.GetFieldErrors()) != len(sampleFieldErrors) {
				t.Fatalf("%d field errors, want %d", len(d.GetFieldErrors()), len(sampleFieldErrors))
			}
			for i, fe := range d.GetFieldErrors() {
				if got, want := render(fe), sampleFieldErrors[i].Error(); got != want {
					t.Errorf("field error %d renders\n %s\nwant\n %s", i, got, want)
				}
			}
		})
	}
}

func TestDenialOfRecoversBadValuesFromCauses(t *testing.T) {
	t.Parallel()
	errs := field.ErrorList{
		field.Invalid(field.NewPath("spec", "start"), "2026-01-01T00:00:00Z", "must be earlier"),
		field.Invalid(field.NewPath("spec", "replicas"), int64(-1), "must not be negative"),
		field.Required(field.NewPath("spec", "name"), "a name is needed"),
	}
	d := denialOf(apierrors.NewInvalid(schema.GroupKind{Kind: "Pod"}, "p", errs))
	want := []struct{ bad, detail string }{
		{`"2026-01-01T00:00:00Z"`, "must be earlier"},
		{`-1`, "must not be negative"},
		{``, "a name is needed"},
	}
	for i, fe := range d.GetFieldErrors() {
		if string(fe.GetBadValue()) != want[i].bad || fe.GetDetail() != want[i].detail {
			t.Errorf("field error %d: bad value %s, detail %q; want %s, %q", i, fe.GetBadValue(), fe.GetDetail(), want[i].bad, want[i].detail)
		}
	}
	if d.GetMessage() != apierrors.NewInvalid(schema.GroupKind{Kind: "Pod"}, "p", errs).Error() {
		t.Errorf("message %q", d.GetMessage())
	}
	if d.GetCode() != 422 || d.GetReason() != "Invalid" {
		t.Errorf("code %d and reason %q, want 422 Invalid", d.GetCode(), d.GetReason())
	}
}

// TestDenialOfStatusErrorsKeepsTheirCode checks that an API status error
// other than Invalid reaches the client with its own code and reason, as
// controller-runtime answers a webhook returning it.
func TestDenialOfStatusErrorsKeepsTheirCode(t *testing.T) {
	t.Parallel()
	gr := schema.GroupResource{Group: "example.com", Resource: "widgets"}
	for name, tc := range map[string]struct {
		err        error
		wantCode   int32
		wantReason string
	}{
		"Conflict":        {apierrors.NewConflict(gr, "w", errors.New("the size is taken")), 409, "Conflict"},
		"AlreadyExists":   {apierrors.NewAlreadyExists(gr, "w"), 409, "AlreadyExists"},
		"BadRequest":      {apierrors.NewBadRequest("no"), 400, "BadRequest"},
		"Forbidden":       {apierrors.NewForbidden(gr, "w", errors.New("no")), 403, "Forbidden"},
		"wrapped Timeout": {fmt.Errorf("asking the quota service: %w", apierrors.NewTimeoutError("slow", 1)), 504, "Timeout"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			d := denialOf(tc.err)
			if d.GetCode() != tc.wantCode || d.GetReason() != tc.wantReason {
				t.Errorf("denial %v, want code %d and reason %q", d, tc.wantCode, tc.wantReason)
			}
		})
	}
	if d := denialOf(errors.New("not on Fridays")); d.GetCode() != 0 || d.GetReason() != "" {
		t.Errorf("a plain error's denial %v, want no code and no reason (403 Forbidden, the default)", d)
	}
}

func TestDenialOfOtherErrors(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		err  error
		want string
	}{
		"if the error is plain, then its message is the denial":    {err: errors.New("not on Fridays"), want: "not on Fridays"},
		"if the error is a status, then its message is the denial": {err: apierrors.NewForbidden(schema.GroupResource{Resource: "widgets"}, "w", errors.New("no")), want: `widgets "w" is forbidden: no`},
		// As controller-runtime does: only an API status keeps its structure.
		"if the error is an aggregate of field errors, then its message is the denial": {
			err:  field.ErrorList{field.Required(field.NewPath("spec"), "")}.ToAggregate(),
			want: "spec: Required value",
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			d := denialOf(tc.err)
			if d.GetMessage() != tc.want || len(d.GetFieldErrors()) != 0 {
				t.Errorf("denial %v, want the message %q alone", d, tc.want)
			}
		})
	}
}
