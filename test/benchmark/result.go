package benchmark

import "time"

// Result is what one run measured: one variant reconciling N Widgets.
//
// A run has phases: the Widgets are created from the first create (t0);
// they are all ready at Convergence; the reconciles stop at Settled; the
// processes then stay idle for Steady; and, unless skipped, a no-op wave
// touches every ConfigMap so that each Widget is reconciled once more with
// nothing to change.
type Result struct {
	// Variant is the variant that ran.
	Variant Variant
	// N is the number of Widgets.
	N int
	// Workers is the Widget controller's max concurrent reconciles, as its
	// controller_runtime_max_concurrent_reconciles metric reported it.
	Workers int

	// Create is how long the harness took to create the Widgets.
	Create time.Duration
	// Convergence is the time from the first create until every Widget
	// reported Ready.
	Convergence time.Duration
	// Settled is the time from the first create until the reconciles stopped.
	Settled time.Duration
	// ReconcilesAtReady counts the reconciles until every Widget was ready.
	ReconcilesAtReady float64
	// Reconciles counts the reconciles until they stopped.
	Reconciles float64
	// Errors counts the reconciles, among them, that returned an error.
	Errors float64
	// Requests counts the operator's (or the host's) API requests until the
	// reconciles stopped, by HTTP method.
	Requests map[string]float64

	// Latency is the duration of a reconcile, from
	// controller_runtime_reconcile_time_seconds: for the host it includes the
	// call to the sidecar and the writes.
	Latency Quantiles
	// Hop is the duration of the Reconcile call from the host to the sidecar,
	// from polyop_sidecar_call_duration_seconds; zero for the baseline.
	Hop Quantiles
	// SidecarCalls counts the host's Reconcile calls to the sidecar until
	// the reconciles stopped (polyop_sidecar_calls_total): one per reconcile,
	// fewer when the host skips calls whose inputs are unchanged.
	SidecarCalls float64

	// Operator is the baseline's process, or the host's.
	Operator ProcessResult
	// Sidecar is the sidecar's process; zero for the baseline.
	Sidecar ProcessResult

	// Steady is how long the processes stayed idle once settled.
	Steady time.Duration
	// SteadyReconciles counts the reconciles while idle: zero unless
	// something reconciles without cause.
	SteadyReconciles float64
	// SteadyRequests counts the API requests while idle.
	SteadyRequests float64

	// NoopWave is the no-op wave, unless it was skipped.
	NoopWave *WaveResult

	// ReadyAtEnd counts the Widgets ready at the end of the run, and
	// OwnedConfigMaps the ConfigMaps holding their Widget's data with the
	// Widget as their controller: both are N after a correct run.
	ReadyAtEnd, OwnedConfigMaps int
}

// Quantiles are the median and the 99th percentile of a duration.
type Quantiles struct {
	P50, P99 time.Duration
}

// ProcessResult is what /proc and the metrics say about one process.
type ProcessResult struct {
	// CPU is the CPU time the process used from the first create until the
	// reconciles stopped.
	CPU time.Duration
	// PeakRSS is the largest the process's resident set was (VmHWM), at the
	// end of the run.
	PeakRSS int64
	// RSS is its resident set at the end of the run, and AnonRSS the
	// anonymous part of it (the heap and stacks, without the program's code).
	RSS, AnonRSS int64
	// HeapInuse is the Go heap in use at the end of the run
	// (go_memstats_heap_inuse_bytes); zero when the process serves no
	// metrics.
	HeapInuse int64
}

// WaveResult is what the no-op wave measured.
type WaveResult struct {
	// Touched counts the ConfigMaps the harness annotated.
	Touched int
	// Reconciles counts the reconciles that followed.
	Reconciles float64
	// Requests counts the operator's API requests meanwhile, by HTTP method.
	Requests map[string]float64
	// Latency is the duration of those reconciles, and Hop of their calls to
	// the sidecar (zero for the baseline): a reconcile with nothing to write
	// is mostly the hop.
	Latency, Hop Quantiles
	// OperatorCPU and SidecarCPU are the CPU time the baseline (or the host)
	// and the sidecar used from the first touch until the reconciles stopped.
	OperatorCPU, SidecarCPU time.Duration
}

// CPUPerReconcile is the CPU time of every process of the run per reconcile
// of the wave.
func (w *WaveResult) CPUPerReconcile() time.Duration {
	return perReconcile(w.OperatorCPU+w.SidecarCPU, w.Reconciles)
}

// Throughput is the number of Widgets made ready per second.
func (r *Result) Throughput() float64 { return float64(r.N) / r.Convergence.Seconds() }

// ReconcileRate is the number of reconciles per second until every Widget
// was ready.
func (r *Result) ReconcileRate() float64 { return r.ReconcilesAtReady / r.Convergence.Seconds() }

// ReconcilesPerObject is the number of reconciles per Widget until they
// stopped.
func (r *Result) ReconcilesPerObject() float64 { return r.Reconciles / float64(r.N) }

// RequestsPerReconcile is the number of API requests per reconcile, and
// ReadsPerReconcile the number of GET requests among them.
func (r *Result) RequestsPerReconcile() float64 { return total(r.Requests) / r.Reconciles }

// ReadsPerReconcile is the number of GET requests per reconcile.
func (r *Result) ReadsPerReconcile() float64 { return r.Requests["GET"] / r.Reconciles }

// CPU is the CPU time of every process of the run.
func (r *Result) CPU() time.Duration { return r.Operator.CPU + r.Sidecar.CPU }

// CPUPerReconcile is the CPU time of every process of the run (the
// baseline's one, or the host and the sidecar together) per reconcile, from
// the first create until the reconciles stopped.
func (r *Result) CPUPerReconcile() time.Duration { return perReconcile(r.CPU(), r.Reconciles) }

// perReconcile divides d by n reconciles; zero when there was none.
func perReconcile(d time.Duration, n float64) time.Duration {
	if n <= 0 {
		return 0
	}
	return time.Duration(float64(d) / n)
}

func total(m map[string]float64) float64 {
	var t float64
	for _, v := range m {
		t += v
	}
	return t
}
