package benchmark

import (
	"fmt"
	"strings"
	"time"
)

// ShardingReport is what the sharding runs measured: the host in label-mode
// sharding (--sharding=labels) in several replicas, each with its own Go
// sidecar, reconciling the same Widgets, against the unsharded host.
type ShardingReport struct {
	// N is the number of Widgets of every run.
	N int
	// Workers is the Widget controller's max concurrent reconciles in each
	// replica (and in the unsharded host).
	Workers int
	// LeaseDuration is the replicas' --shard-lease-duration: how long a
	// killed replica keeps its share.
	LeaseDuration time.Duration
	// Unsharded is the run of the unsharded host with the Go sidecar over a
	// unix socket (the go-unix variant) at N Widgets: the baseline of the
	// per-replica figures.
	Unsharded *Result
	// Runs are the sharded runs, one per number of replicas, fewest first.
	Runs []*ShardRun
	// Handoffs are the ring changes made after the first sharded run
	// converged: replicas started one at a time up to the most replicas run,
	// then one of them killed.
	Handoffs []Handoff
}

// ShardRun is one sharded run: Replicas hosts converging N Widgets.
type ShardRun struct {
	// Replicas is the number of host replicas.
	Replicas int
	// Convergence is the time from the first create until every Widget
	// reported Ready, and Settled until every replica's reconciles stopped.
	Convergence, Settled time.Duration
	// Members are the replicas, in the order they started.
	Members []ReplicaResult
}

// ReplicaResult is what one replica of a sharded run measured, from the
// first create until the reconciles stopped.
type ReplicaResult struct {
	// ID is the replica's name in the ring (--shard-replica-id).
	ID string
	// Leader is set on the replica that held the leader election, and so
	// ran the sharder.
	Leader bool
	// Host and Sidecar are the replica's processes.
	Host, Sidecar ProcessResult
	// Reconciles counts the replica's Widget reconciles.
	Reconciles float64
	// Owned is the replica's polyop_shard_owned_objects once settled: the
	// objects of each sharded kind its cache holds, by kind
	// (Widget.bench.polyop.dev/v1alpha1, ConfigMap.v1).
	Owned map[string]float64
}

// CPUPerReconcile is the replica's CPU, host and sidecar, per reconcile.
func (r ReplicaResult) CPUPerReconcile() time.Duration {
	return perReconcile(r.Host.CPU+r.Sidecar.CPU, r.Reconciles)
}

// Total sums the replicas: their CPU, peak RSS, reconciles and shares.
func (s *ShardRun) Total() ReplicaResult {
	t := ReplicaResult{ID: "all", Owned: map[string]float64{}}
	for _, m := range s.Members {
		t.Host.CPU += m.Host.CPU
		t.Sidecar.CPU += m.Sidecar.CPU
		t.Host.PeakRSS += m.Host.PeakRSS
		t.Sidecar.PeakRSS += m.Sidecar.PeakRSS
		t.Reconciles += m.Reconciles
		for k, v := range m.Owned {
			t.Owned[k] += v
		}
	}
	return t
}

// Handoff is one change of the ring while every Widget was converged.
type Handoff struct {
	// From and To are the live replicas before and after.
	From, To int
	// Replica is the replica started, or killed.
	Replica string
	// Killed is set when the replica was killed (SIGKILL), so that its
	// share moved once its Lease expired; otherwise it was started.
	Killed bool
	// Moved counts the Widgets whose ring owner changed.
	Moved int
	// Ring is the time from the change until every live replica's ring had
	// the new members (polyop_shard_members).
	Ring time.Duration
	// Done is the time from the change until every Widget and its ConfigMap
	// were labelled with the Widget's ring owner (the ConfigMap by the new
	// owner's reconcile) and each live replica's cache held exactly its
	// share.
	Done time.Duration
	// Reconciles counts the live replicas' Widget reconciles meanwhile.
	Reconciles float64
}

// Kinds of polyop_shard_owned_objects in the sharding runs.
const (
	shardWidgetKind    = "Widget.bench.polyop.dev/v1alpha1"
	shardConfigMapKind = "ConfigMap.v1"
)

// markdown renders the sharding runs: a table of the replicas of
// every run against the unsharded host, and a table of the handoffs.
func (s *ShardingReport) markdown(b *strings.Builder) {
	u := s.Unsharded
	fmt.Fprintf(b, "\n#### Sharding: %s Widgets, %s per replica\n\n", thousands(s.N), workersText(s.Workers))
	b.WriteString("Each replica is a host with `--leader-elect --sharding=labels` and its own declarative Go sidecar over a " +
		"unix socket; the unsharded host is the go-unix variant at the same size and workers. On this machine every " +
		"replica, the API server and etcd share the same cores, and the API server bounds throughput: the per-replica " +
		"figures (share, CPU per reconcile, memory) are the result; the convergence times show what sharding costs " +
		"here, not how it scales across nodes.\n\n")
	b.WriteString("| replicas | replica | Widgets cached (share) | ConfigMaps cached | reconciles | CPU per reconcile, host + sidecar | host peak RSS | sidecar peak RSS | converged |\n")
	b.WriteString("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	if u != nil {
		fmt.Fprintf(b, "| unsharded | — | %s | %s | %s | %s = %s + %s | %s | %s | %s |\n",
			thousands(u.N), thousands(u.N), thousands(int(u.Reconciles)),
			ms(u.CPUPerReconcile()), ms(perReconcile(u.Operator.CPU, u.Reconciles)), ms(perReconcile(u.Sidecar.CPU, u.Reconciles)),
			mib(u.Operator.PeakRSS), mib(u.Sidecar.PeakRSS), seconds(u.Convergence))
	}
	var one *ShardRun
	for _, run := range s.Runs {
		if run.Replicas == 1 {
			one = run
		}
	}
	for _, run := range s.Runs {
		rows := run.Members
		if len(rows) > 1 {
			rows = append(rows[:len(rows):len(rows)], run.Total())
		}
		for i, m := range rows {
			total := m.ID == "all"
			replicas, name, converged := "", m.ID, ""
			if i == 0 {
				replicas = fmt.Sprint(run.Replicas)
			}
			if m.Leader {
				name += " (leader)"
			}
			if total || len(run.Members) == 1 {
				converged = s.convergence(run, one)
			}
			widgets := m.Owned[shardWidgetKind]
			cms := thousands(int(m.Owned[shardConfigMapKind]))
			share := fmt.Sprintf("%s (%.1f%%)", thousands(int(widgets)), 100*widgets/float64(max(1, s.N)))
			host, sidecar := mib(m.Host.PeakRSS), mib(m.Sidecar.PeakRSS)
			if u != nil && !total {
				host = withRatio(host, float64(m.Host.PeakRSS), float64(u.Operator.PeakRSS), false)
				sidecar = withRatio(sidecar, float64(m.Sidecar.PeakRSS), float64(u.Sidecar.PeakRSS), false)
			}
			if total {
				name, share = "**all**", thousands(int(widgets))
				if u != nil {
					both := float64(m.Host.PeakRSS + m.Sidecar.PeakRSS)
					host = fmt.Sprintf("%s + %s = %s (%.2f× unsharded)", host, sidecar, mib(m.Host.PeakRSS+m.Sidecar.PeakRSS),
						both/float64(u.Operator.PeakRSS+u.Sidecar.PeakRSS))
					sidecar = ""
				}
			}
			cpu := fmt.Sprintf("%s = %s + %s", ms(m.CPUPerReconcile()), ms(perReconcile(m.Host.CPU, m.Reconciles)), ms(perReconcile(m.Sidecar.CPU, m.Reconciles)))
			if u != nil {
				cpu = withRatio(cpu, float64(m.CPUPerReconcile()), float64(u.CPUPerReconcile()), false)
			}
			fmt.Fprintf(b, "| %s | %s | %s | %s | %s | %s | %s | %s | %s |\n",
				replicas, name, share, cms, thousands(int(m.Reconciles)), cpu, host, sidecar, converged)
		}
	}
	b.WriteString("\nA replica's share is its `polyop_shard_owned_objects` once the reconciles stopped: the Widgets and " +
		"ConfigMaps its cache holds. CPU is each replica's host and sidecar from the first create until the reconciles " +
		"stopped, divided by that replica's reconciles (the leader also runs the sharder); the **all** row divides " +
		"the replicas' CPU by their reconciles, and sums their peak RSS. Ratios (×) are against the unsharded host; " +
		"convergence also against the run with one replica.\n")

	if len(s.Handoffs) == 0 {
		return
	}
	b.WriteString("\n| ring change | Widgets moved | every ring updated | every object with its owner, reconciled | reconciles meanwhile |\n")
	b.WriteString("| --- | ---: | ---: | ---: | ---: |\n")
	for _, h := range s.Handoffs {
		change := fmt.Sprintf("%d → %d: %s started", h.From, h.To, h.Replica)
		if h.Killed {
			change = fmt.Sprintf("%d → %d: %s killed (SIGKILL)", h.From, h.To, h.Replica)
		}
		fmt.Fprintf(b, "| %s | %s (%.1f%%) | %s | %s | %s |\n",
			change, thousands(h.Moved), 100*float64(h.Moved)/float64(max(1, s.N)), seconds(h.Ring), seconds(h.Done), thousands(int(h.Reconciles)))
	}
	fmt.Fprintf(b, "\nThe ring changes run after the run with %s converged and settled, one after another. Times "+
		"are from starting the replica's host and sidecar (its Lease joins the ring once it has started), or from killing "+
		"its host, until every live replica's ring has the new members, and until every Widget and its ConfigMap carry "+
		"the shard label of the Widget's ring owner — the ConfigMap's written by the new owner's reconcile — with each "+
		"replica's cache holding exactly its share. A killed replica keeps its share until its Lease expires "+
		"(`--shard-lease-duration` %s here); a started one takes its share by handoff (the sharder drains each moved "+
		"object from its old owner, then labels it with the new one).\n", replicasText(s.firstReplicas()), s.LeaseDuration)
}

// convergence renders the convergence of run, against the unsharded host's
// and the one-replica run's.
func (s *ShardingReport) convergence(run, one *ShardRun) string {
	out := seconds(run.Convergence)
	var ratios []string
	if s.Unsharded != nil {
		ratios = append(ratios, fmt.Sprintf("%.2f× unsharded", run.Convergence.Seconds()/s.Unsharded.Convergence.Seconds()))
	}
	if one != nil && one != run {
		ratios = append(ratios, fmt.Sprintf("%.2f× 1 replica", run.Convergence.Seconds()/one.Convergence.Seconds()))
	}
	if len(ratios) > 0 {
		out += " (" + strings.Join(ratios, ", ") + ")"
	}
	return out
}

// replicasText is "1 replica" or "n replicas".
func replicasText(n int) string { return countText(n, "replica") }

// firstReplicas is the number of replicas of the run the handoffs followed.
func (s *ShardingReport) firstReplicas() int {
	if len(s.Runs) == 0 {
		return 0
	}
	return s.Runs[0].Replicas
}
