package e2e

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/polyop/polyop/internal/testenv"
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
	host := f.startHost("--metrics-bind-address", metrics, "--metrics-secure=false")

	f.create(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "settings"}, Data: map[string]string{"value": "hello"}})
	testenv.Eventually(f.t, 2*time.Minute, "the host serves metrics", func() (bool, string) {
		_, err := f.scrapeMetrics(metrics)
		return err == nil, fmt.Sprint(err)
	})
	// controller-runtime starts a controller's workers once the caches of
	// every kind it watches have synced: the lists and watches are done.
	if err := host.WaitForOutput(ctxTimeout(t, 2*time.Minute), "Starting workers"); err != nil {
		t.Fatal(err)
	}
	before := requestCounts(t, metrics)
	spec := map[string]any{"configMaps": []any{"a", "b"}, "secrets": []any{"s"}, "value": "v1", "configMapName": "settings"}
	f.createWidget("w", spec)
	testenv.Eventually(f.t, 2*time.Minute, "the widget converges", func() (bool, string) {
		u := f.getWidget("w")
		return statusList(u, "configMaps") == "a,b" && statusString(u, "configMapValue") == "hello" && f.secret("s") != nil,
			fmt.Sprintf("status %v", u.Object["status"])
	})
	f.waitIdle(metrics, "widget")
	create := requestDiff(before, requestCounts(t, metrics))
	t.Logf("API requests from creation to convergence, over %d reconciles: %s", len(f.widgetCalls("w", "Reconcile")), formatCounts(create))
	if n := byMethod(create, "GET"); n != 0 {
		t.Errorf("converging a new widget made %g GET requests; want none", n)
	}

	// A reconcile of a converged object (an annotation change makes one) costs
	// no request at all, and asks for no retry: so once converged, the host's
	// own writes cannot feed a loop of reconciles.
	before = requestCounts(t, metrics)
	retries := f.retries(metrics, "widget")
	poked := f.updateWidget("w", func(u *unstructured.Unstructured) {
		u.SetAnnotations(map[string]string{"e2e.polyop.dev/poke": "1"})
	})
	testenv.Eventually(f.t, time.Minute, "the annotation change is reconciled", func() (bool, string) {
		calls := f.widgetCalls("w", "Reconcile")
		return calls[len(calls)-1].ResourceVersion == poked.GetResourceVersion(), fmt.Sprintf("%d calls", len(calls))
	})
	f.waitIdle(metrics, "widget")
	steady := requestDiff(before, requestCounts(t, metrics))
	t.Logf("API requests of one steady-state reconcile (annotation change): %s", formatCounts(steady))
	if len(steady) != 0 {
		t.Errorf("a steady-state reconcile made API requests: %s; want none", formatCounts(steady))
	}
	if n := f.retries(metrics, "widget") - retries; n != 0 {
		t.Errorf("a steady-state reconcile was requeued %g times; want none", n)
	}

	// Nor do reconciles the sidecar asks for with requeue_after.
	spec["requeueAfter"] = "250ms"
	requeueing := f.setSpec("w", spec)
	testenv.Eventually(f.t, time.Minute, "the requeueing spec is reconciled", func() (bool, string) {
		u := f.getWidget("w")
		g, _, _ := unstructured.NestedInt64(u.Object, "status", "observedGeneration")
		return g == requeueing.GetGeneration(), fmt.Sprint(g)
	})
	f.waitIdle(metrics, "widget")
	before = requestCounts(t, metrics)
	calls := len(f.widgetCalls("w", "Reconcile"))
	testenv.Eventually(f.t, time.Minute, "the widget is requeued 5 times", func() (bool, string) {
		n := len(f.widgetCalls("w", "Reconcile")) - calls
		return n >= 5, fmt.Sprintf("%d requeued reconciles", n)
	})
	f.waitIdle(metrics, "widget")
	requeued := len(f.widgetCalls("w", "Reconcile")) - calls
	periodic := requestDiff(before, requestCounts(t, metrics))
	t.Logf("API requests of %d requeued reconciles: %s", requeued, formatCounts(periodic))
	if len(periodic) != 0 {
		t.Errorf("%d requeued reconciles made API requests %s; want none", requeued, formatCounts(periodic))
	}

	// A spec change writes what it must: each child whose content changed,
	// applied once, and the status; it reads nothing.
	delete(spec, "requeueAfter")
	before = requestCounts(t, metrics)
	spec["value"] = "v2"
	changed := f.setSpec("w", spec)
	testenv.Eventually(f.t, time.Minute, "the new value reaches every child", func() (bool, string) {
		u := f.getWidget("w")
		g, _, _ := unstructured.NestedInt64(u.Object, "status", "observedGeneration")
		return f.configMap("a").Data["value"] == "v2" && f.configMap("b").Data["value"] == "v2" && string(f.secret("s").Data["value"]) == "v2" && g == changed.GetGeneration(), ""
	})
	f.waitIdle(metrics, "widget")
	change := requestDiff(before, requestCounts(t, metrics))
	t.Logf("API requests of a spec change that updates 3 children and the status: %s", formatCounts(change))
	// Exactly: a reconcile that another event starts right after the host's
	// own writes waits for the cache to see them, so it neither re-applies a
	// child nor writes a conflicting status.
	if want := map[string]float64{"PATCH 200": 4}; formatCounts(change) != formatCounts(want) {
		t.Errorf("the spec change made API requests %s; want %s (3 children applied, 1 status written, nothing read)", formatCounts(change), formatCounts(want))
	}
}
