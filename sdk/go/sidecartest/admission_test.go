package sidecartest_test

import (
	"context"
	"errors"
	"testing"

	"github.com/go-logr/logr/testr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/polyop/polyop/sdk/go/sidecar"
	"github.com/polyop/polyop/sdk/go/sidecartest"
)

// secrets refuses Secrets without data and records who asked, and for which
// subresource.
type secrets struct{ user, subresource string }

func (s *secrets) Default(ctx context.Context, sec *corev1.Secret) error {
	req, err := admission.RequestFromContext(ctx)
	if err != nil {
		return err
	}
	if req.DryRun == nil || !*req.DryRun {
		return errors.New("only dry runs here")
	}
	s.user = req.UserInfo.Username
	sec.Type = corev1.SecretTypeOpaque
	return nil
}

func (s *secrets) ValidateCreate(_ context.Context, sec *corev1.Secret) (sidecar.Warnings, error) {
	if len(sec.Data) == 0 {
		return sidecar.Warnings{"empty"}, apierrors.NewInvalid(schema.GroupKind{Kind: "Secret"}, sec.Name,
			field.ErrorList{field.Required(field.NewPath("data"), "a secret needs data")})
	}
	return nil, nil
}

func (s *secrets) ValidateUpdate(ctx context.Context, _, _ *corev1.Secret) (sidecar.Warnings, error) {
	req, err := admission.RequestFromContext(ctx)
	if err != nil {
		return nil, err
	}
	s.subresource = req.SubResource
	return nil, nil
}

func (s *secrets) ValidateDelete(context.Context, *corev1.Secret) (sidecar.Warnings, error) {
	return nil, nil
}

func TestHarnessCallsTheWebhooks(t *testing.T) {
	t.Parallel()
	srv, err := sidecar.New(sidecar.Options{Name: "test", Logger: testr.New(t)})
	if err != nil {
		t.Fatal(err)
	}
	s := &secrets{}
	if err := sidecar.NewWebhookManagedBy[*corev1.Secret](srv).WithDefaulter(s).WithValidator(s).Complete(); err != nil {
		t.Fatal(err)
	}
	h := sidecartest.New(t, srv)
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "s"}}

	res := h.Default(t.Context(), secret, sidecartest.DryRun(), sidecartest.AsUser("alice", "admins"))
	if !res.Allowed || s.user != "alice" {
		t.Fatalf("Default: allowed %v, denial %+v, user %q", res.Allowed, res.Denial, s.user)
	}
	var got corev1.Secret
	res.Object(&got)
	if got.Type != corev1.SecretTypeOpaque || got.Name != "s" {
		t.Errorf("defaulted %+v", got)
	}
	if res := h.Default(t.Context(), secret); res.Allowed || res.Denial.Message != "only dry runs here" {
		t.Errorf("Default without a dry run: %+v", res.Denial)
	}

	res = h.ValidateCreate(t.Context(), secret)
	if res.Allowed || len(res.Denial.FieldErrors) != 1 || res.Denial.FieldErrors[0].Error() != "data: Required value: a secret needs data" || res.Warnings[0] != "empty" {
		t.Errorf("ValidateCreate: %+v, warnings %q", res.Denial, res.Warnings)
	}

	res = h.ValidateUpdate(t.Context(), secret, secret, sidecartest.Subresource("status"))
	if !res.Allowed || s.subresource != "status" {
		t.Errorf("ValidateUpdate of the status: allowed %v, the validator saw subresource %q", res.Allowed, s.subresource)
	}
	if res = h.ValidateUpdate(t.Context(), secret, secret); !res.Allowed || s.subresource != "" {
		t.Errorf("ValidateUpdate of the object: allowed %v, the validator saw subresource %q", res.Allowed, s.subresource)
	}
}
