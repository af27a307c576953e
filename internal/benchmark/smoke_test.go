package benchmark

import (
	"context"
	"strings"
	"testing"
	"time"
)

// TestSmoke runs the benchmark small, with every Go variant (the declarative
// sidecar over both transports and the imperative one), at 2 workers, so that
// the harness cannot rot: every Widget converges in every variant with the
// workers asked for, the idle phase is flat, and a reconcile with nothing to
// change writes nothing.
// `make bench` runs it at full size.
func TestSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane and real processes")
	}
	const n = 50
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	rep, err := Run(ctx, Options{
		Sizes:              []int{n},
		Variants:           []string{"in-process", "go-unix", "go-tcp", "go-skip-unix", "go-imperative-unix"},
		Workers:            []int{2},
		Steady:             2 * time.Second,
		SharedControlPlane: true,
		Logf:               t.Logf,
		settleQuiet:        500 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Sizes) != 1 || len(rep.Sizes[0].Results) != 5 || rep.Sizes[0].Workers != 2 {
		t.Fatalf("want one size at 2 workers with 5 runs, got %+v", rep.Sizes)
	}
	for _, r := range rep.Sizes[0].Results {
		t.Run(r.Variant.Name, func(t *testing.T) {
			if r.ReadyAtEnd != n || r.OwnedConfigMaps != n {
				t.Errorf("%d Widgets ready and %d owned ConfigMaps at the end, want %d of each", r.ReadyAtEnd, r.OwnedConfigMaps, n)
			}
			if r.Workers != 2 {
				t.Errorf("the controller ran %d workers, want 2", r.Workers)
			}
			if r.CPUPerReconcile() <= 0 {
				t.Errorf("CPU per reconcile %s, want a positive figure", r.CPUPerReconcile())
			}
			if r.Reconciles < n {
				t.Errorf("%.0f reconciles for %d Widgets", r.Reconciles, n)
			}
			if r.SteadyReconciles != 0 {
				t.Errorf("%.0f reconciles while idle for %s, want none", r.SteadyReconciles, r.Steady)
			}
			if r.Operator.PeakRSS == 0 || r.Operator.CPU == 0 || (!r.Variant.Baseline && r.Sidecar.PeakRSS == 0) {
				t.Errorf("no CPU or memory figures: operator %+v, sidecar %+v", r.Operator, r.Sidecar)
			}
			if r.Latency.P99 == 0 || (!r.Variant.Baseline && r.Hop.P99 == 0) {
				t.Errorf("no latency figures: reconcile %+v, sidecar call %+v", r.Latency, r.Hop)
			}
			switch {
			case r.Variant.Baseline:
			case r.Variant.Name == "go-skip-unix":
				// The reconcile that the host's own apply of the ConfigMap
				// causes has the inputs of the one before: no call.
				if r.SidecarCalls >= r.Reconciles {
					t.Errorf("%.0f sidecar calls for %.0f reconciles, want fewer: the host skips calls whose inputs are unchanged", r.SidecarCalls, r.Reconciles)
				}
			case r.SidecarCalls < r.Reconciles:
				t.Errorf("%.0f sidecar calls for %.0f reconciles, want one per reconcile", r.SidecarCalls, r.Reconciles)
			}
			w := r.NoopWave
			if w == nil {
				t.Fatal("the no-op wave did not run")
			}
			if w.Touched != n || w.Reconciles < n {
				t.Errorf("the no-op wave touched %d ConfigMaps and reconciled %.0f times, want %d of each", w.Touched, w.Reconciles, n)
			}
			if writes := total(w.Requests) - w.Requests["GET"]; writes != 0 {
				t.Errorf("the no-op wave wrote %.0f times (%v), want no write", writes, w.Requests)
			}
		})
	}
	md := rep.Markdown()
	for _, want := range []string{"#### 50 Widgets, 2 workers", "in-process controller-runtime (baseline)", "host + Go sidecar, unix socket", "host + Go sidecar, TCP loopback", "host + imperative Go sidecar", "host + Go sidecar skipping unchanged inputs", "CPU per reconcile", "#### Goals"} {
		if !strings.Contains(md, want) {
			t.Errorf("the report lacks %q:\n%s", want, md)
		}
	}
}
