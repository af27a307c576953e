package controller

import (
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/polyop/polyop/internal/description"
	"github.com/polyop/polyop/internal/sidecar"
)

// The actions of polyop_children_total.
const (
	// childApplied: the host applied a desired child (created, changed, or
	// replaced it).
	childApplied = "applied"
	// childUnchanged: a desired child was as last applied, so the host sent
	// no request for it.
	childUnchanged = "unchanged"
	// childPruned: the host deleted a child that is no longer desired.
	childPruned = "pruned"
	// childRefused: the host wrote nothing to a desired child: another object
	// controls it, nobody does and its kind does not declare adoption, or the
	// apply would change an immutable field and its kind does not declare
	// replacement.
	childRefused = "refused"
)

// childrenTotal counts what the host did with each child, in
// controller-runtime's metrics registry.
var childrenTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "polyop_children_total",
	Help: "Children of reconciled objects, by controller, kind (Kind.group) and what the host did with each " +
		"(applied, unchanged, pruned, refused).",
}, []string{"controller", "kind", "action"})

func init() {
	metrics.Registry.MustRegister(childrenTotal)
}

// countChild counts one child of kind gvk in polyop_children_total.
func (r *Reconciler) countChild(gvk schema.GroupVersionKind, action string) {
	childrenTotal.WithLabelValues(r.Controller.Name, gvk.GroupKind().String(), action).Inc()
}

// initMetrics gives every series of controller c's sidecar calls and
// children a value of zero, as controller-runtime does for its reconcile
// counters, so that they are served (and rate() of them is defined) before
// the first call or child, and the first error counts as an increase.
func initMetrics(c description.Controller, children []ChildKind) {
	methods := []string{"Reconcile"}
	if c.Finalizer != "" {
		methods = append(methods, "Finalize")
	}
	sidecar.InitCallMetrics(c.Name, methods...)
	if c.SkipUnchangedInputs {
		callsSkipped.WithLabelValues(c.Name)
	}
	for _, k := range children {
		for _, action := range []string{childApplied, childUnchanged, childPruned, childRefused} {
			childrenTotal.WithLabelValues(c.Name, k.GVK.GroupKind().String(), action)
		}
	}
}
