package benchmark

import (
	"strings"
	"testing"
	"time"
)

// replicaResult builds a replica that reconciled owned Widgets twice each,
// with cpu of host CPU.
func replicaResult(id string, owned float64, cpu time.Duration, leader bool) ReplicaResult {
	return ReplicaResult{
		ID: id, Leader: leader, Reconciles: 2 * owned,
		Host:    ProcessResult{CPU: cpu, PeakRSS: 80 << 20},
		Sidecar: ProcessResult{CPU: cpu / 4, PeakRSS: 40 << 20},
		Owned:   map[string]float64{shardWidgetKind: owned, shardConfigMapKind: owned},
	}
}

func shardingReport() *ShardingReport {
	unsharded := result(unixVariant, 1000, 20*time.Second)
	unsharded.Sidecar = ProcessResult{CPU: 500 * time.Millisecond, PeakRSS: 40 << 20}
	return &ShardingReport{
		N: 1000, Workers: 1, LeaseDuration: 15 * time.Second, Unsharded: unsharded,
		Runs: []*ShardRun{
			{Replicas: 1, Convergence: 25 * time.Second, Settled: 26 * time.Second,
				Members: []ReplicaResult{replicaResult("host-0", 1000, 2*time.Second, true)}},
			{Replicas: 2, Convergence: 20 * time.Second, Settled: 21 * time.Second,
				Members: []ReplicaResult{replicaResult("host-0", 480, time.Second, true), replicaResult("host-1", 520, time.Second, false)}},
		},
		Handoffs: []Handoff{
			{From: 1, To: 2, Replica: "host-1", Moved: 520, Ring: time.Second, Done: 4 * time.Second, Reconciles: 1600},
			{From: 2, To: 1, Replica: "host-1", Killed: true, Moved: 520, Ring: 12 * time.Second, Done: 14 * time.Second, Reconciles: 1040},
		},
	}
}

func TestShardingMarkdown(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	shardingReport().markdown(&b)
	md := b.String()
	for _, want := range []string{
		"#### Sharding: 1,000 Widgets, 1 worker per replica",
		"the API server bounds throughput",
		// The unsharded host: 1.5 s over 2,000 reconciles.
		"| unsharded | — | 1,000 | 1,000 | 2,000 | 0.75 ms = 0.50 ms + 0.25 ms | 100 MiB | 40 MiB | 20.00 s |",
		// One replica: 2.5 s over 2,000 reconciles, 80 MiB against 100.
		"| 1 | host-0 (leader) | 1,000 (100.0%) | 1,000 | 2,000 | 1.25 ms = 1.00 ms + 0.25 ms (1.67×) | 80 MiB (0.80×) | 40 MiB (1.00×) | 25.00 s (1.25× unsharded) |",
		"|  | host-1 | 520 (52.0%) | 520 | 1,040 |",
		// Both: 2.5 s over 2,000 reconciles, 240 MiB against 140.
		"|  | **all** | 1,000 | 1,000 | 2,000 | 1.25 ms = 1.00 ms + 0.25 ms (1.67×) | 160 MiB + 80 MiB = 240 MiB (1.71× unsharded) |  | 20.00 s (1.00× unsharded, 0.80× 1 replica) |",
		"| 1 → 2: host-1 started | 520 (52.0%) | 1.00 s | 4.00 s | 1,600 |",
		"| 2 → 1: host-1 killed (SIGKILL) | 520 (52.0%) | 12.00 s | 14.00 s | 1,040 |",
		"after the run with 1 replica converged",
		"(`--shard-lease-duration` 15s here)",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("the sharding section lacks %q:\n%s", want, md)
		}
	}
}
