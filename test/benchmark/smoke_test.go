package benchmark

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
)

// TestSmoke runs the benchmark small, with every Go variant (the declarative
// sidecar over both transports and the imperative one), at 2 workers, so that
// the harness cannot rot: every Widget converges in every variant with the
// workers asked for, the idle phase is flat, and a reconcile with nothing to
// change writes nothing. Its sharding runs, 1 and 2 replicas with 60 Widgets,
// then a replica started and one killed, measure every replica and every
// ring change.
// `make bench` runs it at full size.
func TestSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane and real processes")
	}
	// The harness's cache of the sharding runs logs through
	// controller-runtime's logger: noise here, as in hack/bench.
	ctrllog.SetLogger(logr.Discard())
	const n, shardN = 50, 60
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	rep, err := Run(ctx, Options{
		Sizes:              []int{n},
		Variants:           []string{"in-process", "go-unix", "go-tcp", "go-skip-unix", "go-imperative-unix"},
		Workers:            []int{2},
		Steady:             2 * time.Second,
		SharedControlPlane: true,
		ShardingReplicas:   []int{1, 2},
		ShardingObjects:    shardN,
		ShardLeaseDuration: 5 * time.Second,
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
	t.Run("sharding", func(t *testing.T) { checkShardingSmoke(t, rep.Sharding, shardN) })
	md := rep.Markdown()
	for _, want := range []string{"#### 50 Widgets, 2 workers", "#### Sharding: 60 Widgets, 2 workers per replica", "2 → 1: host-1 killed (SIGKILL)", "in-process controller-runtime (baseline)", "host + Go sidecar, unix socket", "host + Go sidecar, TCP loopback", "host + imperative Go sidecar", "host + Go sidecar skipping unchanged inputs", "CPU per reconcile", "#### Goals"} {
		if !strings.Contains(md, want) {
			t.Errorf("the report lacks %q:\n%s", want, md)
		}
	}
}

// checkShardingSmoke checks the sharding runs of the smoke run: one and two
// replicas, every Widget cached by exactly one replica with its ConfigMap,
// figures for every replica, and the two ring changes (1 → 2, then 2 → 1 by
// a kill) timed with every object back with its owner.
func checkShardingSmoke(t *testing.T, sh *ShardingReport, n int) {
	if sh == nil {
		t.Fatal("the sharding runs did not run")
	}
	if u := sh.Unsharded; u == nil || u.Variant.Name != "go-unix" || u.Reconciles < float64(n) || u.CPUPerReconcile() <= 0 {
		t.Errorf("the unsharded baseline is missing or empty: %+v", u)
	}
	if len(sh.Runs) != 2 || sh.Runs[0].Replicas != 1 || sh.Runs[1].Replicas != 2 {
		t.Fatalf("want runs of 1 and 2 replicas, got %+v", sh.Runs)
	}
	for _, run := range sh.Runs {
		if len(run.Members) != run.Replicas || run.Convergence <= 0 || run.Settled < run.Convergence {
			t.Errorf("%d replicas: %d members measured, converged after %s, settled after %s", run.Replicas, len(run.Members), run.Convergence, run.Settled)
		}
		total := run.Total()
		if total.Owned[shardWidgetKind] != float64(n) || total.Owned[shardConfigMapKind] != float64(n) {
			t.Errorf("%d replicas cache %v, want %d Widgets and %d ConfigMaps in all", run.Replicas, total.Owned, n, n)
		}
		leaders := 0
		for _, m := range run.Members {
			if m.Owned[shardWidgetKind] == 0 || m.Reconciles < m.Owned[shardWidgetKind] {
				t.Errorf("%d replicas: %s caches %v and reconciled %.0f times", run.Replicas, m.ID, m.Owned, m.Reconciles)
			}
			if m.Host.CPU <= 0 || m.Host.PeakRSS == 0 || m.Sidecar.PeakRSS == 0 || m.CPUPerReconcile() <= 0 {
				t.Errorf("%d replicas: %s has no CPU or memory figures: host %+v, sidecar %+v", run.Replicas, m.ID, m.Host, m.Sidecar)
			}
			if m.Leader {
				leaders++
			}
		}
		if leaders != 1 {
			t.Errorf("%d replicas: %d leaders, want 1", run.Replicas, leaders)
		}
	}
	if len(sh.Handoffs) != 2 {
		t.Fatalf("want 2 ring changes (1 → 2, 2 → 1), got %+v", sh.Handoffs)
	}
	grow, kill := sh.Handoffs[0], sh.Handoffs[1]
	if grow.From != 1 || grow.To != 2 || grow.Killed || grow.Replica != "host-1" {
		t.Errorf("the first ring change is %+v, want host-1 started, 1 → 2", grow)
	}
	if kill.From != 2 || kill.To != 1 || !kill.Killed || kill.Replica != "host-1" {
		t.Errorf("the second ring change is %+v, want host-1 (not the leader) killed, 2 → 1", kill)
	}
	for _, h := range sh.Handoffs {
		if h.Moved == 0 || h.Ring <= 0 || h.Done < h.Ring || h.Reconciles < float64(h.Moved) {
			t.Errorf("%d → %d: %d Widgets moved, ring updated after %s, done after %s, %.0f reconciles: want every moved Widget reconciled by its new owner",
				h.From, h.To, h.Moved, h.Ring, h.Done, h.Reconciles)
		}
	}
	// The killed replica kept its share until its Lease expired.
	if kill.Ring < sh.LeaseDuration/2 {
		t.Errorf("the ring dropped the killed replica after %s, within half its Lease (%s)", kill.Ring, sh.LeaseDuration)
	}
}
