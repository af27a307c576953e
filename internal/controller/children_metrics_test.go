package controller

import (
	"context"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/polyop/polyop/internal/description"
	"github.com/polyop/polyop/internal/fakesidecar"
	polyopv1alpha1 "github.com/polyop/polyop/sdk/go/gen/polyop/v1alpha1"
)

func TestChildrenAreCountedByAction(t *testing.T) {
	t.Parallel()
	var resp *polyopv1alpha1.ReconcileResponse
	sc := &fakesidecar.Fake{OnReconcile: fakesidecar.Answer(func(*polyopv1alpha1.ReconcileRequest) *polyopv1alpha1.ReconcileResponse { return resp })}
	r, _, _ := newFlow(t, "", sc, ownerMap(), controlledBy("theirs", "other", "other-uid", nil))
	// A controller name of this test's own, so that the counters are its.
	r.Controller.Name = "children-metrics"
	count := func(action string) float64 {
		return testutil.ToFloat64(childrenTotal.WithLabelValues("children-metrics", "Secret", action))
	}
	ctx := context.Background()
	reconcileWith := func(children ...[]byte) {
		t.Helper()
		resp = &polyopv1alpha1.ReconcileResponse{DesiredChildren: children, ChildrenComplete: true}
		_, _ = r.Reconcile(ctx, req)
	}

	// Another object's child is refused; the one beside it applied.
	reconcileWith(secretChild("theirs", "MQ=="), secretChild("new", "MQ=="))
	if count(childRefused) != 1 || count(childApplied) != 1 {
		t.Errorf("refused %v, applied %v, want 1 and 1", count(childRefused), count(childApplied))
	}
	// The same child again: unchanged, no request.
	reconcileWith(secretChild("new", "MQ=="))
	if count(childUnchanged) != 1 || count(childApplied) != 1 {
		t.Errorf("unchanged %v, applied %v, want 1 and still 1", count(childUnchanged), count(childApplied))
	}
	// Nothing desired: the child the host applied is pruned.
	reconcileWith()
	if count(childPruned) != 1 {
		t.Errorf("pruned %v, want 1", count(childPruned))
	}
}

func TestMetricsAreServedBeforeTheFirstCall(t *testing.T) {
	t.Parallel()
	initMetrics(description.Controller{Name: "init-metrics", Finalizer: "example.com/cleanup"}, []ChildKind{{GVK: secretGVK}})
	families, err := metrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	series := map[string]int{}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "controller" && l.GetValue() == "init-metrics" {
					series[f.GetName()]++
				}
			}
		}
	}
	// Five results for Reconcile and Finalize each; four actions for Secrets.
	if series["polyop_sidecar_calls_total"] != 10 || series["polyop_children_total"] != 4 {
		t.Errorf("series served before any call: %v, want 10 of polyop_sidecar_calls_total and 4 of polyop_children_total", series)
	}
}
