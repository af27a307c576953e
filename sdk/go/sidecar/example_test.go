package sidecar_test

import (
	"context"
	"fmt"
	"os"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/polyop/polyop/sdk/go/sidecar"
)

// DeploymentReconciler reports how many replicas a Deployment asks for.
type DeploymentReconciler struct{}

func (r *DeploymentReconciler) Reconcile(ctx context.Context, d *appsv1.Deployment) (sidecar.Result, error) {
	log := ctrl.LoggerFrom(ctx)
	if d.Spec.Replicas == nil {
		return sidecar.Result{}, sidecar.TerminalError(fmt.Errorf("spec.replicas is not set"))
	}
	d.Status.ObservedGeneration = d.Generation
	log.Info("Observed", "replicas", *d.Spec.Replicas)
	sidecar.Recorder(ctx).Eventf(corev1.EventTypeNormal, "Observed", "wants %d replicas", *d.Spec.Replicas)
	return sidecar.Result{}, nil
}

func Example() {
	srv, err := sidecar.New(sidecar.Options{Name: "deployment-watcher"})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return
	}
	err = sidecar.NewControllerManagedBy[*appsv1.Deployment](srv).
		WithUpdateFilters(sidecar.GenerationChanged).
		InNamespaces("production").
		WithMaxConcurrentReconciles(4).
		Complete(&DeploymentReconciler{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return
	}

	// A real sidecar serves until it is told to stop:
	//
	//	err = srv.Serve(ctrl.SetupSignalHandler(), sidecar.DefaultAddress)

	// What the host reads at start, when it describes the sidecar:
	resp := describe(srv)
	for _, c := range resp.GetControllers() {
		fmt.Println(c.GetName(), c.GetForKind().GetKind(), c.GetNamespaces(), c.GetPredicates().GetUpdateFilters())
	}
	// Output:
	// deployment Deployment [production] [UPDATE_FILTER_GENERATION_CHANGED]
}

func ExampleReconcilerFunc() {
	srv, _ := sidecar.New(sidecar.Options{Name: "configs"})
	err := sidecar.NewControllerManagedBy[*corev1.ConfigMap](srv).
		Named("config-checker").
		Complete(sidecar.ReconcilerFunc[*corev1.ConfigMap](func(ctx context.Context, cm *corev1.ConfigMap) (sidecar.Result, error) {
			if _, ok := cm.Data["config.yaml"]; !ok {
				sidecar.Recorder(ctx).Event(corev1.EventTypeWarning, "MissingConfig", "config.yaml is missing")
			}
			return sidecar.Result{}, nil
		}))
	fmt.Println(err)
	// Output: <nil>
}
