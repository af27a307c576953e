package benchmark

import (
	"math"
	"time"

	"github.com/polyop/polyop/test/benchmark/widget"
)

// Measuring a run: its Result from the snapshots of its processes' metrics
// and /proc, taken at the phases Result describes.

// fill computes the result from the snapshots at the first create, when
// every Widget was ready, when the reconciles stopped, and after the steady
// state.
func (r *Result) fill(before, ready, settled, steady snapshot) {
	r.Settled = settled.at.Sub(before.at)
	r.ReconcilesAtReady = ready.reconciles() - before.reconciles()
	r.Reconciles = settled.reconciles() - before.reconciles()
	errorsSel := labels{"controller": widget.ControllerName, "result": "error"}
	r.Errors = settled.metrics.sum(metricReconcileTotal, errorsSel) - before.metrics.sum(metricReconcileTotal, errorsSel)
	r.Requests = requestsBetween(before, settled)

	r.Latency, r.Hop = latencies(before, settled, r.Variant)
	calls := labels{"method": "Reconcile"}
	r.SidecarCalls = settled.metrics.sum(metricSidecarCalls, calls) - before.metrics.sum(metricSidecarCalls, calls)

	r.Operator.CPU = settled.operator.CPU - before.operator.CPU
	r.Sidecar.CPU = settled.sidecar.CPU - before.sidecar.CPU

	r.Steady = steady.at.Sub(settled.at)
	r.SteadyReconciles = steady.reconciles() - settled.reconciles()
	r.SteadyRequests = total(requestsBetween(settled, steady))
}

// quantilesOf is the median and 99th percentile of the observations a
// histogram of seconds gained between two snapshots.
func quantilesOf(a, b metrics, name string, sel labels) Quantiles {
	d := observed(a, b, name, sel)
	seconds := func(q float64) time.Duration {
		v := d.quantile(q)
		if math.IsNaN(v) {
			return 0
		}
		return time.Duration(v * float64(time.Second))
	}
	return Quantiles{P50: seconds(0.5), P99: seconds(0.99)}
}

// latencies are the quantiles of the reconciles, and of the calls to the
// sidecar, between two snapshots.
func latencies(a, b snapshot, v Variant) (reconcile, hop Quantiles) {
	reconcile = quantilesOf(a.metrics, b.metrics, metricReconcileTime, labels{"controller": widget.ControllerName})
	if !v.Baseline {
		hop = quantilesOf(a.metrics, b.metrics, metricSidecarCall, labels{"method": "Reconcile", "code": "OK"})
	}
	return reconcile, hop
}

// requestsBetween is the number of API requests made between two snapshots,
// by HTTP method.
func requestsBetween(a, b snapshot) map[string]float64 {
	before := a.metrics.byLabel(metricRequests, "method", nil)
	out := map[string]float64{}
	for method, n := range b.metrics.byLabel(metricRequests, "method", nil) {
		if d := n - before[method]; d > 0 {
			out[method] = d
		}
	}
	return out
}
