package conformance

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/polyop/polyop/internal/testenv"
)

// TestFinalizeReconcilerBehindTheHost declares a finalizer with the SDK's
// builder and finalizes with a FinalizeReconciler: the host adds the
// finalizer, calls Finalize when the object is deleted, keeps the finalizer
// while Finalize asks to be called again, and removes it once Finalize is
// done.
func TestFinalizeReconcilerBehindTheHost(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.start("sidecar", testSidecarBin, "finalize", "--address", f.sidecarAddress())
	f.startHost()
	ctx := context.Background()
	key := client.ObjectKey{Namespace: f.ns, Name: "held"}

	cm := configMap(f.ns, "held", nil)
	cm.Labels = map[string]string{"conformance.polyop.dev/finalize": "yes"}
	cm.Annotations = map[string]string{"conformance.polyop.dev/hold": "true"}
	if err := k8s.Create(ctx, cm); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 2*time.Minute, "the host adds the finalizer", func() (bool, string) {
		if err := k8s.Get(ctx, key, cm); err != nil {
			return false, err.Error()
		}
		return slices.Contains(cm.Finalizers, "conformance.polyop.dev/cleanup"), fmt.Sprint(cm.Finalizers)
	})

	if err := k8s.Delete(ctx, cm); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, time.Minute, "Finalize holds the object", func() (bool, string) {
		return reasons(t, f.ns)["Holding"] >= 2, fmt.Sprint(reasons(t, f.ns))
	})
	if err := k8s.Get(ctx, key, cm); err != nil {
		t.Fatalf("the held object is gone: %v", err)
	}
	if cm.DeletionTimestamp == nil || !slices.Contains(cm.Finalizers, "conformance.polyop.dev/cleanup") {
		t.Fatalf("held object: deletion timestamp %v, finalizers %v", cm.DeletionTimestamp, cm.Finalizers)
	}

	patch := client.RawPatch("application/merge-patch+json", []byte(`{"metadata":{"annotations":{"conformance.polyop.dev/hold":"false"}}}`))
	if err := k8s.Patch(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "held"}}, patch); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, time.Minute, "the object goes once Finalize is done", func() (bool, string) {
		err := k8s.Get(ctx, key, &corev1.ConfigMap{})
		return apierrors.IsNotFound(err), errString(err)
	})
	// Events are written in the background: the object can be gone before
	// the event that Finalize recorded is.
	testenv.Eventually(t, time.Minute, "the Finalized event is recorded", func() (bool, string) {
		got := reasons(t, f.ns)
		return got["Finalized"] >= 1, fmt.Sprint(got)
	})
	if got := reasons(t, f.ns)["Finalized"]; got != 1 {
		t.Errorf("Finalized events = %d, want 1", got)
	}
}

// reasons counts the events in ns by reason.
func reasons(t *testing.T, ns string) map[string]int {
	t.Helper()
	var events corev1.EventList
	if err := k8s.List(context.Background(), &events, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for _, e := range events.Items {
		n := int(e.Count)
		if n == 0 {
			n = 1
		}
		if e.Series != nil && int(e.Series.Count) > n {
			n = int(e.Series.Count)
		}
		out[e.Reason] += n
	}
	return out
}
