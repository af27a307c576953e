package sidecar_test

import (
	"context"
	"fmt"
	"os"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	"github.com/polyop/polyop/sdk/go/sidecar"
)

// DeploymentWebhook defaults and validates Deployments, with
// controller-runtime's admission interfaces.
type DeploymentWebhook struct{}

// Default sets two replicas on a Deployment that gives none.
func (DeploymentWebhook) Default(_ context.Context, d *appsv1.Deployment) error {
	if d.Spec.Replicas == nil {
		d.Spec.Replicas = ptr.To[int32](2)
	}
	return nil
}

// ValidateCreate refuses more than ten replicas.
func (w DeploymentWebhook) ValidateCreate(_ context.Context, d *appsv1.Deployment) (sidecar.Warnings, error) {
	return w.validate(d)
}

// ValidateUpdate refuses more than ten replicas.
func (w DeploymentWebhook) ValidateUpdate(_ context.Context, _, d *appsv1.Deployment) (sidecar.Warnings, error) {
	return w.validate(d)
}

// ValidateDelete allows every deletion.
func (DeploymentWebhook) ValidateDelete(context.Context, *appsv1.Deployment) (sidecar.Warnings, error) {
	return nil, nil
}

func (DeploymentWebhook) validate(d *appsv1.Deployment) (sidecar.Warnings, error) {
	if d.Spec.Replicas != nil && *d.Spec.Replicas > 10 {
		return nil, apierrors.NewInvalid(schema.GroupKind{Group: "apps", Kind: "Deployment"}, d.Name, field.ErrorList{
			field.Invalid(field.NewPath("spec", "replicas"), *d.Spec.Replicas, "must be at most 10"),
		})
	}
	return nil, nil
}

func ExampleNewWebhookManagedBy() {
	srv, err := sidecar.New(sidecar.Options{Name: "deployment-policy"})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return
	}
	err = sidecar.NewWebhookManagedBy[*appsv1.Deployment](srv).
		WithDefaulter(DeploymentWebhook{}).
		WithValidator(DeploymentWebhook{}).
		WithFailurePolicy(sidecar.Ignore).
		WithTimeoutSeconds(5).
		Complete()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return
	}

	// What the host reads at start, when it describes the sidecar:
	resp := describe(srv)
	for _, w := range resp.GetWebhooks() {
		fmt.Println(w.GetKind().GetKind(), w.GetDefault(), w.GetValidate(), w.GetFailurePolicy(), w.GetTimeoutSeconds())
	}
	// Output:
	// Deployment true true FAILURE_POLICY_IGNORE 5
}
