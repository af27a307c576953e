package main

import (
	"context"
	"fmt"

	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	"github.com/polyop/polyop/sdk/go/sidecar"
	conformancev1 "github.com/polyop/polyop/test/conformance/indexsidecar/api/v1"
	"github.com/polyop/polyop/test/conformance/indexsidecar/internal/controller"
	webhookv1 "github.com/polyop/polyop/test/conformance/indexsidecar/internal/webhook/v1"
)

// serveSidecar is the same operator as a polyop sidecar: the host runs the
// cache, the controller's workqueue, the webhook server, metrics, health and
// leader election, and calls the sidecar's reconciler and webhooks.
func serveSidecar(ctx context.Context, address string) error {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return err
	}
	if err := conformancev1.AddToScheme(scheme); err != nil {
		return err
	}

	srv, err := sidecar.New(sidecar.Options{Name: "crew-operator", Scheme: scheme})
	if err != nil {
		return err
	}

	// SetupWithManager, on the Server: the same index func, the same
	// controller, declared with the SDK's builder.
	r := &controller.CrewReconciler{
		Client: srv.GetClient(),
		Scheme: srv.Scheme(),
	}
	if err := controller.IndexJobsByCrew(ctx, srv.GetFieldIndexer()); err != nil {
		return err
	}
	if err := sidecar.NewControllerManagedBy[*conformancev1.Crew](srv).
		Owns(&batchv1.Job{}).
		Named("crew").
		CompleteRequests(r); err != nil {
		return fmt.Errorf("unable to create controller Crew: %w", err)
	}

	// SetupCrewWebhookWithManager, on the Server: the same Defaulter and
	// Validator, served by the host at the same paths.
	if err := sidecar.NewWebhookManagedBy[*conformancev1.Crew](srv).
		WithDefaulter(&webhookv1.CrewCustomDefaulter{}).
		WithValidator(&webhookv1.CrewCustomValidator{}).
		Complete(); err != nil {
		return fmt.Errorf("unable to create webhook Crew: %w", err)
	}

	return srv.Serve(ctx, address)
}
