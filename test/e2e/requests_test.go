package e2e

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// TestSteadyStateReconcileCostsNoAPIRequests counts the API requests the host
// makes (controller-runtime's rest_client_requests_total, on the host's
// metrics endpoint) around reconciles of a Widget with three children, a
// field-path watch and a read through the cluster service: once converged, a
// reconcile reads everything from the cache and writes nothing; a spec change
// writes only what changed.
func TestSteadyStateReconcileCostsNoAPIRequests(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	metrics := freePort(t)
	f.startChildSidecar()
	f.startHost("--metrics-bind-address", metrics, "--metrics-secure=false")

	f.create(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "settings"}, Data: map[string]string{"value": "hello"}})
	f.eventually(60*time.Second, "the host serves metrics", func() (bool, string) {
		_, err := http.Get("http://" + metrics + "/metrics")
		return err == nil, fmt.Sprint(err)
	})
	time.Sleep(2 * time.Second) // the caches sync
	before := requestCounts(t, metrics)
	spec := map[string]any{"configMaps": []any{"a", "b"}, "secrets": []any{"s"}, "value": "v1", "configMapName": "settings"}
	f.createWidget("w", spec)
	f.eventually(60*time.Second, "the widget converges", func() (bool, string) {
		u := f.getWidget("w")
		return statusList(u, "configMaps") == "a,b" && statusString(u, "configMapValue") == "hello" && f.secret("s") != nil,
			fmt.Sprintf("status %v", u.Object["status"])
	})

	// After convergence the reconcile count stays flat: the host's own writes
	// (children applied, status, finalizer) do not feed a loop.
	settle := func() int {
		n := len(f.widgetCalls("w", "Reconcile"))
		for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); {
			time.Sleep(2 * time.Second)
			m := len(f.widgetCalls("w", "Reconcile"))
			if m == n {
				return n
			}
			n = m
		}
		t.Fatalf("the reconcile count never settled: %d", n)
		return 0
	}
	converged := settle()
	time.Sleep(3 * time.Second)
	if n := len(f.widgetCalls("w", "Reconcile")); n != converged {
		t.Errorf("after convergence the widget was reconciled %d more times: a hot loop", n-converged)
	}
	create := requestDiff(before, requestCounts(t, metrics))
	t.Logf("API requests from creation to convergence, over %d reconciles: %s", converged, formatCounts(create))
	if n := byMethod(create, "GET"); n != 0 {
		t.Errorf("converging a new widget made %g GET requests; want none", n)
	}

	// A reconcile of a converged object (an annotation change makes one) costs
	// no request at all.
	before = requestCounts(t, metrics)
	poked := f.updateWidget("w", func(u *unstructured.Unstructured) {
		u.SetAnnotations(map[string]string{"e2e.polyop.dev/poke": "1"})
	})
	f.eventually(30*time.Second, "the annotation change is reconciled", func() (bool, string) {
		calls := f.widgetCalls("w", "Reconcile")
		return calls[len(calls)-1].ResourceVersion == poked.GetResourceVersion(), fmt.Sprintf("%d calls", len(calls))
	})
	time.Sleep(time.Second)
	steady := requestDiff(before, requestCounts(t, metrics))
	t.Logf("API requests of one steady-state reconcile (annotation change): %s", formatCounts(steady))
	if len(steady) != 0 {
		t.Errorf("a steady-state reconcile made API requests: %s; want none", formatCounts(steady))
	}

	// Nor do reconciles the sidecar asks for with requeue_after.
	spec["requeueAfter"] = "250ms"
	requeueing := f.setSpec("w", spec)
	f.eventually(30*time.Second, "the requeueing spec is reconciled", func() (bool, string) {
		u := f.getWidget("w")
		g, _, _ := unstructured.NestedInt64(u.Object, "status", "observedGeneration")
		return g == requeueing.GetGeneration(), fmt.Sprint(g)
	})
	time.Sleep(time.Second)
	before = requestCounts(t, metrics)
	calls := len(f.widgetCalls("w", "Reconcile"))
	time.Sleep(3 * time.Second)
	requeued := len(f.widgetCalls("w", "Reconcile")) - calls
	periodic := requestDiff(before, requestCounts(t, metrics))
	t.Logf("API requests of %d requeued reconciles: %s", requeued, formatCounts(periodic))
	if requeued < 5 || len(periodic) != 0 {
		t.Errorf("%d requeued reconciles made API requests %s; want at least 5 reconciles and no request", requeued, formatCounts(periodic))
	}

	// A spec change writes what it must: each child whose content changed,
	// applied once, and the status; it reads nothing.
	delete(spec, "requeueAfter")
	before = requestCounts(t, metrics)
	spec["value"] = "v2"
	changed := f.setSpec("w", spec)
	f.eventually(30*time.Second, "the new value reaches every child", func() (bool, string) {
		u := f.getWidget("w")
		g, _, _ := unstructured.NestedInt64(u.Object, "status", "observedGeneration")
		return f.configMap("a").Data["value"] == "v2" && f.configMap("b").Data["value"] == "v2" && string(f.secret("s").Data["value"]) == "v2" && g == changed.GetGeneration(), ""
	})
	settle()
	change := requestDiff(before, requestCounts(t, metrics))
	t.Logf("API requests of a spec change that updates 3 children and the status: %s", formatCounts(change))
	// Exactly: a reconcile that another event starts right after the host's
	// own writes waits for the cache to see them, so it neither re-applies a
	// child nor writes a conflicting status.
	if want := map[string]float64{"PATCH 200": 4}; formatCounts(change) != formatCounts(want) {
		t.Errorf("the spec change made API requests %s; want %s (3 children applied, 1 status written, nothing read)", formatCounts(change), formatCounts(want))
	}
}
