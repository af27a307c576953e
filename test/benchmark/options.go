package benchmark

import (
	"time"
)

// Options configure a benchmark. The zero value runs the default benchmark;
// every field's comment gives its default.
type Options struct {
	// Sizes are the numbers of Widgets, one run of every variant each.
	// Defaults to 500 and 2,000.
	Sizes []int
	// Variants names the variants to run (see Variants), the baseline among
	// them. Defaults to every variant that can run here.
	Variants []string

	// Rounds is how many times every variant runs at every size; the report
	// shows each variant's median run by throughput, and the ratios of each
	// round. The memory run runs once. Defaults to 1.
	Rounds int

	// MemoryObjects is the number of Widgets of the memory run, which compares
	// the memory of the host with the baseline's at scale. Zero skips it.
	// Defaults to 0.
	MemoryObjects int
	// MemoryVariants names the variants of the memory run. Defaults to
	// in-process and go-unix: the host's cache does not depend on the
	// transport or the sidecar's language.
	MemoryVariants []string

	// ShardingReplicas are the numbers of host replicas of the sharding
	// runs (see ShardingReport), one run each, the host sharding the Widgets
	// among its replicas by label, each replica with its own Go sidecar; the
	// ring changes (replicas started one at a time up to the most, then one
	// killed) follow the run with the fewest. Defaults to none: no sharding
	// runs.
	ShardingReplicas []int
	// ShardingObjects is the number of Widgets of the sharding runs.
	// Defaults to 10,000.
	ShardingObjects int
	// ShardLeaseDuration is the replicas' --shard-lease-duration: how long a
	// killed replica keeps its share. Defaults to 15s, the host's default.
	ShardLeaseDuration time.Duration

	// Steady is how long each run stays idle once every object is ready and
	// the reconciles have stopped, to show that they stay stopped.
	// Defaults to 10s.
	Steady time.Duration
	// SkipNoopWave skips the phase that touches every ConfigMap, one at a
	// time, once the objects are ready, so that each Widget is reconciled once
	// more with nothing to change. Defaults to false: the wave runs.
	SkipNoopWave bool
	// Workers are the Widget controller's numbers of workers (its max
	// concurrent reconciles: the baseline's controller option, the sidecar's
	// declaration, which the host takes), one run of every variant at every
	// size each. Defaults to 1 (controller-runtime's default) and 5.
	Workers []int
	// Creators is how many Widgets the harness creates at once. Defaults to 8.
	Creators int
	// DataEntries and ValueBytes size each Widget's spec.data (and so its
	// ConfigMap): DataEntries keys of ValueBytes bytes each. Default to 4 and
	// 128 (a Widget of about 1.3 KB as the API server stores it).
	DataEntries, ValueBytes int

	// SharedControlPlane runs every run on one control plane, each in a
	// namespace of its own. Defaults to false: each run gets a fresh control
	// plane, so that no run pays for the objects of the runs before it.
	SharedControlPlane bool
	// RunTimeout bounds one run, from starting its processes to stopping them.
	// Defaults to 2 minutes plus 50ms per Widget.
	RunTimeout time.Duration

	// ProfileDir, when set, receives CPU profiles of the host (or the
	// baseline) and of the Go sidecar, taken from each run's first create for
	// ProfileSeconds, and a heap profile at the end of each run.
	// Defaults to no profiles.
	ProfileDir string
	// ProfileSeconds is the length of the CPU profiles. Defaults to 10.
	ProfileSeconds int
	// HostArgs are added to the host's command line in every sidecar
	// variant, for experiments (for example --zap-log-level=debug). Defaults
	// to none.
	HostArgs []string
	// Env is added to the environment of every process of every variant,
	// and SidecarEnv to the sidecars' alone, for experiments (for example
	// GOMAXPROCS=1 or GOGC=50). Default to none.
	Env, SidecarEnv []string
	// LogDir, when set, receives the output of every process of every run.
	// Defaults to none: the output is kept in memory and shown when a run
	// fails.
	LogDir string

	// Logf reports progress. Defaults to discarding it.
	Logf func(format string, args ...any) `json:"-"`

	// settleQuiet is how long the reconcile count must stay unchanged, with
	// an empty workqueue, for the reconciles to count as stopped. Defaults to
	// a second.
	settleQuiet time.Duration
}

func (o Options) withDefaults() Options {
	if len(o.Sizes) == 0 {
		o.Sizes = []int{500, 2000}
	}
	if len(o.MemoryVariants) == 0 {
		o.MemoryVariants = []string{"in-process", "go-unix"}
	}
	if o.Rounds <= 0 {
		o.Rounds = 1
	}
	if o.ShardingObjects == 0 {
		o.ShardingObjects = 10000
	}
	if o.ShardLeaseDuration == 0 {
		o.ShardLeaseDuration = 15 * time.Second
	}
	if o.Steady == 0 {
		o.Steady = 10 * time.Second
	}
	if len(o.Workers) == 0 {
		o.Workers = []int{1, 5}
	}
	if o.Creators == 0 {
		o.Creators = 8
	}
	if o.DataEntries == 0 {
		o.DataEntries = 4
	}
	if o.ValueBytes == 0 {
		o.ValueBytes = 128
	}
	if o.ProfileSeconds == 0 {
		o.ProfileSeconds = 10
	}
	if o.settleQuiet == 0 {
		o.settleQuiet = time.Second
	}
	if o.Logf == nil {
		o.Logf = func(string, ...any) {}
	}
	return o
}

// runTimeout is the bound of a run of n Widgets.
func (o Options) runTimeout(n int) time.Duration {
	if o.RunTimeout > 0 {
		return o.RunTimeout
	}
	return 2*time.Minute + time.Duration(n)*50*time.Millisecond + o.Steady
}
