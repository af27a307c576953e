package widget

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	benchv1alpha1 "github.com/polyop/polyop/test/benchmark/api/v1alpha1"
)

// Reconciler is the Widget controller written for controller-runtime: it
// reads the Widget and its ConfigMap through Client, applies the ConfigMap
// with server-side apply only when the ConfigMap Client returns differs from
// it, and patches the status with optimistic concurrency only when it
// changed.
//
// The in-process baseline runs it over its manager's client (reads from the
// informer cache); the imperative Go sidecar runs it unchanged over the Go
// SDK's client (every call a request to the host's Cluster service, reads
// from the host's cache).
type Reconciler struct {
	// Client reads and writes the objects.
	Client client.Client
	// FieldManager is the field manager of the ConfigMaps it applies.
	FieldManager string
}

// Reconcile makes the Widget's ConfigMap hold its data and marks it ready.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	w := &benchv1alpha1.Widget{}
	if err := r.Client.Get(ctx, req.NamespacedName, w); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}

	desired := ConfigMap(w)
	observed := &corev1.ConfigMap{}
	err := r.Client.Get(ctx, client.ObjectKeyFromObject(desired), observed)
	switch {
	case apierrors.IsNotFound(err) || err == nil && !Holds(observed, desired, w):
		if err := r.apply(ctx, w, desired); err != nil {
			return ctrl.Result{}, err
		}
	case err != nil:
		return ctrl.Result{}, fmt.Errorf("reading ConfigMap %s: %w", req.NamespacedName, err)
	}

	before := w.DeepCopy()
	MarkReady(w)
	if equality.Semantic.DeepEqual(before.Status, w.Status) {
		return ctrl.Result{}, nil
	}
	err = r.Client.Status().Patch(ctx, w, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{}))
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
func (r *Reconciler) apply(ctx context.Context, w *benchv1alpha1.Widget, desired *corev1.ConfigMap) error {
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
	if err := r.Client.Apply(ctx, cm, client.FieldOwner(r.FieldManager), client.ForceOwnership); err != nil {
		return fmt.Errorf("applying ConfigMap %s/%s: %w", desired.Namespace, desired.Name, err)
	}
	return nil
}
