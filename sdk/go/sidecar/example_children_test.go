package sidecar_test

import (
	"context"
	"fmt"
	"os"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/polyop/polyop/sdk/go/sidecar"
)

// A declarative controller returns the children it wants and lets the host
// apply, own and prune them.
func ExampleDesire() {
	srv, err := sidecar.New(sidecar.Options{Name: "settings-publisher"})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return
	}
	err = sidecar.NewControllerManagedBy[*appsv1.Deployment](srv).
		Owns(&corev1.ConfigMap{}, sidecar.SendObserved()).
		Watches(&corev1.Secret{}, sidecar.MapByLabel("example.com/deployment")).
		Complete(sidecar.ReconcilerFunc[*appsv1.Deployment](func(ctx context.Context, d *appsv1.Deployment) (sidecar.Result, error) {
			observed, err := sidecar.ObservedChildren[*corev1.ConfigMap](ctx)
			if err != nil {
				return sidecar.Result{}, err
			}
			ctrl.LoggerFrom(ctx).Info("Observed", "configMaps", len(observed))
			settings := &corev1.ConfigMap{
				ObjectMeta: metav1.ObjectMeta{Name: d.Name + "-settings"},
				Data:       map[string]string{"replicas": fmt.Sprint(*d.Spec.Replicas)},
			}
			if err := sidecar.Desire(ctx, settings); err != nil {
				return sidecar.Result{}, err
			}
			// The settings are the only child: the host deletes any other
			// ConfigMap this Deployment owns.
			sidecar.DesiredComplete(ctx)
			return sidecar.Result{}, nil
		}))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return
	}
	// What the host reads at start, when it describes the sidecar:
	resp := describe(srv)
	c := resp.GetControllers()[0]
	fmt.Println(c.GetOwns()[0].GetKind().GetKind(), c.GetOwns()[0].GetSendObserved())
	fmt.Println(c.GetWatches()[0].GetKind().GetKind(), c.GetWatches()[0].GetLabel())
	// Output:
	// ConfigMap true
	// Secret example.com/deployment
}

// ReplicaReporter is an ordinary controller-runtime reconciler, written
// against client.Client.
type ReplicaReporter struct {
	client.Client
}

func (r *ReplicaReporter) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var d appsv1.Deployment
	if err := r.Get(ctx, req.NamespacedName, &d); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	d.Status.ObservedGeneration = d.Generation
	return ctrl.Result{}, r.Status().Update(ctx, &d)
}

// A controller-runtime reconciler runs in a sidecar with the Server's client,
// which reads and writes through the host's Cluster service.
func ExampleBuilder_CompleteRequests() {
	srv, err := sidecar.New(sidecar.Options{Name: "replica-reporter"})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return
	}
	err = sidecar.NewControllerManagedBy[*appsv1.Deployment](srv).
		CompleteRequests(&ReplicaReporter{Client: srv.GetClient()})
	fmt.Println(err)
	// Output:
	// <nil>
}

// A finalizer is declared with the builder; the reconciler finalizes.
type BackendReconciler struct{}

func (BackendReconciler) Reconcile(context.Context, *corev1.ConfigMap) (sidecar.Result, error) {
	return sidecar.Result{}, nil
}

func (BackendReconciler) Finalize(ctx context.Context, cm *corev1.ConfigMap) (sidecar.Result, error) {
	sidecar.Recorder(ctx).Event(corev1.EventTypeNormal, "Released", "released the backend of "+cm.Name)
	return sidecar.Result{}, nil
}

func ExampleFinalizeReconciler() {
	srv, _ := sidecar.New(sidecar.Options{Name: "backends"})
	err := sidecar.NewControllerManagedBy[*corev1.ConfigMap](srv).
		WithFinalizer("example.com/backend").
		Complete(BackendReconciler{})
	fmt.Println(err)
	// Output:
	// <nil>
}
