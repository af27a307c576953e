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
// it changed), and the same metrics. The objects are typed.
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
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	benchv1alpha1 "github.com/polyop/polyop/internal/benchmark/api/v1alpha1"
	"github.com/polyop/polyop/internal/benchmark/widget"
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
		Complete(&reconciler{client: mgr.GetClient()})
	if err != nil {
		return fmt.Errorf("building the controller: %w", err)
	}
	return mgr.Start(ctx)
}

// reconciler is the Widget controller, in process.
type reconciler struct {
	client client.Client
}

func (r *reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	w := &benchv1alpha1.Widget{}
	if err := r.client.Get(ctx, req.NamespacedName, w); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}

	desired := widget.ConfigMap(w)
	observed := &corev1.ConfigMap{}
	err := r.client.Get(ctx, client.ObjectKeyFromObject(desired), observed)
	switch {
	case apierrors.IsNotFound(err) || err == nil && !widget.Holds(observed, desired, w):
		if err := r.apply(ctx, w, desired); err != nil {
			return ctrl.Result{}, err
		}
	case err != nil:
		return ctrl.Result{}, fmt.Errorf("reading ConfigMap %s from the cache: %w", req.NamespacedName, err)
	}

	before := w.DeepCopy()
	widget.MarkReady(w)
	if equality.Semantic.DeepEqual(before.Status, w.Status) {
		return ctrl.Result{}, nil
	}
	err = r.client.Status().Patch(ctx, w, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{}))
	if apierrors.IsConflict(err) {
		// The cache was behind: reconcile again from a newer Widget.
		return ctrl.Result{Requeue: true}, nil //nolint:staticcheck // the rate-limited requeue the host uses too
	}
	if err != nil {
		return ctrl.Result{}, fmt.Errorf("writing the status of Widget %s: %w", req.NamespacedName, err)
	}
	return ctrl.Result{}, nil
}

// apply applies desired, controlled by w, with server-side apply.
func (r *reconciler) apply(ctx context.Context, w *benchv1alpha1.Widget, desired *corev1.ConfigMap) error {
	gvk := benchv1alpha1.GroupVersion.WithKind("Widget")
	cm := corev1ac.ConfigMap(desired.Name, desired.Namespace).
		WithLabels(desired.Labels).
		WithData(desired.Data).
		WithOwnerReferences(metav1ac.OwnerReference().
			WithAPIVersion(gvk.GroupVersion().String()).
			WithKind(gvk.Kind).
			WithName(w.Name).
			WithUID(w.UID).
			WithController(true).
			WithBlockOwnerDeletion(true))
	if err := r.client.Apply(ctx, cm, client.FieldOwner(fieldManager), client.ForceOwnership); err != nil {
		return fmt.Errorf("applying ConfigMap %s/%s: %w", desired.Namespace, desired.Name, err)
	}
	return nil
}
