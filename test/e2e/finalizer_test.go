package e2e

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/polyop/polyop/internal/testenv"
)

const widgetFinalizer = "e2e.polyop.dev/cleanup"

func TestFinalizerBlocksDeletionUntilTheSidecarIsDone(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.startChildSidecar()
	f.startHost()

	f.create(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "external"}})
	w := f.newWidget("w", map[string]any{"value": "v"})
	w.SetAnnotations(map[string]string{"e2e.polyop.dev/finalize": "fail", "e2e.polyop.dev/cleanup-configmap": "external"})
	f.create(w)

	// The finalizer is in place before the sidecar first sees the object.
	testenv.Eventually(f.t, time.Minute, "the widget is reconciled", func() (bool, string) {
		return len(f.widgetCalls("w", "Reconcile")) > 0, ""
	})
	if first := f.widgetCalls("w", "Reconcile")[0]; !slices.Contains(first.Finalizers, widgetFinalizer) {
		t.Errorf("the first reconcile saw finalizers %v, want %s already added", first.Finalizers, widgetFinalizer)
	}
	if got := f.getWidget("w").GetFinalizers(); !slices.Equal(got, []string{widgetFinalizer}) {
		t.Errorf("finalizers = %v, want [%s]", got, widgetFinalizer)
	}

	// While Finalize fails, the object stays, and Finalize is retried with
	// backoff.
	if err := k8s.Delete(context.Background(), f.getWidget("w")); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(f.t, time.Minute, "Finalize is retried", func() (bool, string) {
		calls := f.widgetCalls("w", "Finalize")
		return len(calls) >= 4, fmt.Sprintf("%d calls", len(calls))
	})
	calls := f.widgetCalls("w", "Finalize")
	for i, c := range calls[:4] {
		if c.Retries != i || !c.Deleting {
			t.Errorf("Finalize call %d: retries %d, deleting %v; want %d, true", i, c.Retries, c.Deleting, i)
		}
	}
	if gap1, gap3 := calls[1].Time.Sub(calls[0].Time), calls[3].Time.Sub(calls[2].Time); gap3 <= gap1 {
		t.Errorf("Finalize retries did not back off: gaps %s then %s", gap1, gap3)
	}
	u := f.getWidget("w")
	if u == nil || u.GetDeletionTimestamp() == nil || !slices.Contains(u.GetFinalizers(), widgetFinalizer) {
		t.Fatalf("the widget is gone or lost its finalizer while Finalize fails: %v", u)
	}
	if f.configMap("external") == nil {
		t.Fatalf("the clean-up ran although Finalize failed")
	}
	for _, c := range f.widgetCalls("w", "Reconcile") {
		if c.Deleting {
			t.Errorf("Reconcile was called for the widget being deleted: %+v", c)
		}
	}

	// Once Finalize succeeds (it deletes the ConfigMap through the cluster
	// service), the finalizer goes, and so does the object.
	f.updateWidget("w", func(u *unstructured.Unstructured) {
		u.SetAnnotations(map[string]string{"e2e.polyop.dev/finalize": "ok", "e2e.polyop.dev/cleanup-configmap": "external"})
	})
	testenv.Eventually(f.t, time.Minute, "the widget is deleted", func() (bool, string) {
		u := f.getWidget("w")
		if u == nil {
			return true, ""
		}
		return false, fmt.Sprintf("finalizers %v", u.GetFinalizers())
	})
	if f.configMap("external") != nil {
		t.Errorf("Finalize's clean-up did not delete ConfigMap external")
	}
	testenv.Eventually(f.t, time.Minute, "the Finalized event is recorded", func() (bool, string) {
		var list eventsv1.EventList
		if err := k8s.List(context.Background(), &list, client.InNamespace(f.ns)); err != nil {
			return false, err.Error()
		}
		for _, e := range list.Items {
			if e.Regarding.Name == "w" && e.Reason == "Finalized" {
				return true, ""
			}
		}
		return false, fmt.Sprintf("%d events", len(list.Items))
	})
}

func TestFinalizeThatAsksToWaitIsCalledAgainWithoutBackoff(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.startChildSidecar()
	f.startHost()

	w := f.newWidget("patient", map[string]any{})
	w.SetAnnotations(map[string]string{"e2e.polyop.dev/finalize": "wait"})
	f.create(w)
	testenv.Eventually(f.t, time.Minute, "the finalizer is added", func() (bool, string) {
		u := f.getWidget("patient")
		return slices.Contains(u.GetFinalizers(), widgetFinalizer), fmt.Sprint(u.GetFinalizers())
	})
	if err := k8s.Delete(context.Background(), f.getWidget("patient")); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(f.t, time.Minute, "Finalize is called again and again", func() (bool, string) {
		return len(f.widgetCalls("patient", "Finalize")) >= 5, ""
	})
	calls := f.widgetCalls("patient", "Finalize")
	// The first call may carry a retry from before it (a status write that
	// raced the deletion requeues with backoff); every call after a Finalize
	// that asked to wait must not: waiting is not failing.
	for _, c := range calls[1:] {
		if c.Retries != 0 {
			t.Errorf("a Finalize that asked to wait counted as a failure: %+v", c)
		}
	}
	// The sidecar asks for 200ms each time: no gap is shorter (a busy machine
	// only makes them longer), and the shortest is not far off.
	var gaps []time.Duration
	for i := 2; i < len(calls); i++ {
		gaps = append(gaps, calls[i].Time.Sub(calls[i-1].Time))
	}
	if shortest := slices.Min(gaps); shortest < 150*time.Millisecond || shortest > 2*time.Second {
		t.Errorf("Finalize came back after %v, want about 200ms each time", gaps)
	}
	if f.getWidget("patient") == nil {
		t.Fatalf("the widget was deleted while Finalize asked to wait")
	}
	f.updateWidget("patient", func(u *unstructured.Unstructured) { u.SetAnnotations(nil) })
	testenv.Eventually(f.t, time.Minute, "the widget is deleted", func() (bool, string) {
		return f.getWidget("patient") == nil, ""
	})
}
