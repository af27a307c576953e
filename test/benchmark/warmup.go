package benchmark

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	benchv1alpha1 "github.com/polyop/polyop/test/benchmark/api/v1alpha1"
	"github.com/polyop/polyop/test/benchmark/widget"
)

// warmupObjects is how many Widgets warm a control plane up.
const warmupObjects = 20

// warmup makes a fresh API server do once what every run asks of it (create
// Widgets, apply owned ConfigMaps with server-side apply, patch the Widgets'
// status), so that the first run does not pay for what the API server builds
// lazily (its handlers for the CRD, the type converters of server-side apply)
// and the runs after it do not.
func warmup(ctx context.Context, c client.Client, opts Options) error {
	ns := "bench-warmup-" + rand.String(5)
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		return fmt.Errorf("warming the control plane up: %w", err)
	}
	for i := range warmupObjects {
		w := newWidget(ns, i, opts)
		if err := c.Create(ctx, w); err != nil {
			return fmt.Errorf("warming the control plane up: %w", err)
		}
		desired := widget.ConfigMap(w)
		cm := corev1ac.ConfigMap(desired.Name, desired.Namespace).
			WithLabels(desired.Labels).
			WithData(desired.Data).
			WithOwnerReferences(metav1ac.OwnerReference().
				WithAPIVersion(benchv1alpha1.GroupVersion.String()).
				WithKind("Widget").
				WithName(w.Name).
				WithUID(w.UID).
				WithController(true))
		if err := c.Apply(ctx, cm, client.FieldOwner("bench-warmup"), client.ForceOwnership); err != nil {
			return fmt.Errorf("warming the control plane up: %w", err)
		}
		before := w.DeepCopy()
		widget.MarkReady(w)
		if err := c.Status().Patch(ctx, w, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
			return fmt.Errorf("warming the control plane up: %w", err)
		}
	}
	return nil
}
