package main

import (
	"context"
	"flag"
	"fmt"

	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	conformancev1 "github.com/polyop/polyop/test/conformance/indexsidecar/api/v1"
	"github.com/polyop/polyop/test/conformance/indexsidecar/internal/controller"
	webhookv1 "github.com/polyop/polyop/test/conformance/indexsidecar/internal/webhook/v1"
)

// managerFlags are kubebuilder's main.go flags that the test sets.
type managerFlags struct {
	namespace, webhookHost, webhookCertDir string
	webhookPort                            int
}

func (f *managerFlags) bind(fs *flag.FlagSet) {
	fs.StringVar(&f.namespace, "namespace", "", "With --standalone, watch only this namespace.")
	fs.StringVar(&f.webhookHost, "webhook-host", "", "With --standalone, the address the webhook server binds.")
	fs.IntVar(&f.webhookPort, "webhook-port", 9443, "With --standalone, the webhook server's port.")
	fs.StringVar(&f.webhookCertDir, "webhook-cert-dir", "", "With --standalone, the directory of the webhook server's tls.crt and tls.key.")
}

// runManager is kubebuilder's main.go, cut to what this operator uses: the
// manager, with its webhook server, its metrics and health endpoints and its
// cache, runs the controller and the webhooks itself.
func runManager(ctx context.Context, f managerFlags) error {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return err
	}
	if err := conformancev1.AddToScheme(scheme); err != nil {
		return err
	}

	mgr, err := ctrl.NewManager(ctrl.GetConfigOrDie(), ctrl.Options{
		Scheme:                 scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		LeaderElection:         false,
		WebhookServer: webhook.NewServer(webhook.Options{
			Host:    f.webhookHost,
			Port:    f.webhookPort,
			CertDir: f.webhookCertDir,
		}),
		Cache: cache.Options{DefaultNamespaces: map[string]cache.Config{f.namespace: {}}},
	})
	if err != nil {
		return fmt.Errorf("unable to start manager: %w", err)
	}

	if err := (&controller.CrewReconciler{
		Client: mgr.GetClient(),
		Scheme: mgr.GetScheme(),
	}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("unable to create controller Crew: %w", err)
	}
	if err := webhookv1.SetupCrewWebhookWithManager(mgr); err != nil {
		return fmt.Errorf("unable to create webhook Crew: %w", err)
	}

	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return fmt.Errorf("unable to set up health check: %w", err)
	}
	if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
		return fmt.Errorf("unable to set up ready check: %w", err)
	}
	return mgr.Start(ctx)
}
