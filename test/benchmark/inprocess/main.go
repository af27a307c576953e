// Command inprocess is the baseline of polyop's end-to-end benchmark: the
// Widget controller as an ordinary controller-runtime operator, reconciling
// in its own process.
//
// It is built the way the polyop host builds its manager, so that the two
// differ only in where the reconcile logic runs: the same cache settings
// (managedFields stripped, the watched namespace only), the same predicates
// (GenerationChanged on Widgets, every event on the owned ConfigMaps), the
// same writes (a ConfigMap applied with server-side apply only when the cache
// shows it differs, the status patched with optimistic concurrency only when
// it changed), and the same metrics. The objects are typed. Its reconciler is
// widget.Reconciler, which the imperative Go sidecar runs too.
//
// Usage:
//
//	inprocess --kubeconfig FILE --namespace NS [--metrics-bind-address 127.0.0.1:PORT] [--pprof-bind-address ADDR]
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	benchv1alpha1 "github.com/polyop/polyop/test/benchmark/api/v1alpha1"
	"github.com/polyop/polyop/test/benchmark/widget"
)

// fieldManager is the field manager of the ConfigMaps the operator applies.
const fieldManager = "bench-inprocess"

func main() {
	namespace := flag.String("namespace", "", "The only namespace to watch (required).")
	metricsAddr := flag.String("metrics-bind-address", "0", "Where the (plain HTTP) metrics endpoint listens; 0 disables it.")
	pprofAddr := flag.String("pprof-bind-address", "", "Where the pprof endpoints listen; empty disables them.")
	concurrency := flag.Int("max-concurrent-reconciles", 1, "How many Widgets are reconciled at once.")
	zapOpts := zap.Options{}
	zapOpts.BindFlags(flag.CommandLine)
	flag.Parse()
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zapOpts)))

	if err := run(ctrl.SetupSignalHandler(), *namespace, *metricsAddr, *pprofAddr, *concurrency); err != nil {
		fmt.Fprintln(os.Stderr, "inprocess:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, namespace, metricsAddr, pprofAddr string, concurrency int) error {
	if namespace == "" {
		return errors.New("--namespace is required")
	}
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return err
	}
	if err := benchv1alpha1.AddToScheme(scheme); err != nil {
		return err
	}
	cfg, err := ctrl.GetConfig()
	if err != nil {
		return fmt.Errorf("loading a kubeconfig: %w", err)
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme: scheme,
		Cache: cache.Options{
			DefaultTransform:  cache.TransformStripManagedFields(),
			DefaultNamespaces: map[string]cache.Config{namespace: {}},
		},
		Metrics:                metricsserver.Options{BindAddress: metricsAddr},
		HealthProbeBindAddress: "0",
		PprofBindAddress:       pprofAddr,
	})
	if err != nil {
		return fmt.Errorf("creating the manager: %w", err)
	}
	err = ctrl.NewControllerManagedBy(mgr).
		Named(widget.ControllerName).
		For(&benchv1alpha1.Widget{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Owns(&corev1.ConfigMap{}).
		WithOptions(controller.Options{MaxConcurrentReconciles: concurrency}).
		Complete(&widget.Reconciler{Client: mgr.GetClient(), FieldManager: fieldManager})
	if err != nil {
		return fmt.Errorf("building the controller: %w", err)
	}
	return mgr.Start(ctx)
}
