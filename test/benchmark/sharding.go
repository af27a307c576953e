package benchmark

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"

	"github.com/polyop/polyop/test/benchmark/widget"
)

// shardRing is the ring of the sharding runs: the Go sidecar's name
// (gosidecar's description), which names it.
const shardRing = "bench-widget"

// Metrics of a sharded replica the harness reads.
const (
	metricShardOwned   = "polyop_shard_owned_objects"
	metricShardMembers = "polyop_shard_members"
)

// shardPoll is how often the harness looks at the replicas and the labels
// while it times a ring change.
const shardPoll = 250 * time.Millisecond

// sharding runs the sharded host at opts.ShardingObjects Widgets with each
// number of replicas of opts.ShardingReplicas, against the unsharded host
// (go-unix) at the same size: the memory run's, when it ran that, else a run
// of its own. The ring changes follow the run with the fewest replicas.
func (b *bench) sharding(ctx context.Context, memory *SizeReport) (*ShardingReport, error) {
	opts := b.opts
	n, workers := opts.ShardingObjects, opts.Workers[0]
	rep := &ShardingReport{N: n, Workers: workers, LeaseDuration: opts.ShardLeaseDuration}
	counts := slices.Clone(opts.ShardingReplicas)
	slices.Sort(counts)
	counts = slices.Compact(counts)
	if counts[0] < 1 {
		return nil, fmt.Errorf("sharding: %d replicas: want at least one", counts[0])
	}
	goUnix, err := variantNamed("go-unix")
	if err != nil {
		return nil, err
	}

	if memory != nil && memory.N == n && memory.Workers == workers {
		if i := memory.variantIndex(goUnix.Name); i >= 0 {
			rep.Unsharded = memory.Results[i]
		}
	}
	if rep.Unsharded == nil {
		opts.Logf("sharding: the unsharded host (%s), %d Widgets, %d workers", goUnix.Name, n, workers)
		res, err := b.run(ctx, goUnix, n, workers, true)
		if err != nil {
			return nil, fmt.Errorf("sharding: the unsharded host (%s) with %d Widgets: %w", goUnix.Name, n, err)
		}
		rep.Unsharded = res
	}

	for i, k := range counts {
		// The ring changes follow the first run: up to the most replicas,
		// then one of them killed.
		grow, kill := 0, false
		if i == 0 {
			grow, kill = counts[len(counts)-1]-k, counts[len(counts)-1] >= 2
		}
		run, handoffs, err := b.shardRun(ctx, goUnix, k, n, workers, grow, kill)
		if run != nil {
			rep.Runs = append(rep.Runs, run)
		}
		rep.Handoffs = append(rep.Handoffs, handoffs...)
		if err != nil {
			return rep, fmt.Errorf("sharding: %d replicas with %d Widgets: %w", k, n, err)
		}
	}
	return rep, nil
}

// variantNamed returns the variant called name.
func variantNamed(name string) (Variant, error) {
	for _, v := range Variants() {
		if v.Name == name {
			return v, nil
		}
	}
	return Variant{}, fmt.Errorf("no variant %s", name)
}

// shardRun is the state of one sharded run.
type shardRun struct {
	*bench
	variant    Variant // each replica's host and sidecar
	k          int     // the replicas the run starts with
	n, workers int
	ns         string
	replicas   []*replica // every replica started, killed ones included
	placements *placements
}

// replica is one host replica and its sidecar: a run of the variant whose
// host also has the sharding flags.
type replica struct {
	*run
	id     string
	killed bool
}

// shardRun runs k replicas converging n Widgets; then starts grow more, one
// at a time, and then, when kill is set, kills one.
func (b *bench) shardRun(ctx context.Context, v Variant, k, n, workers, grow int, kill bool) (*ShardRun, []Handoff, error) {
	changes := grow
	if kill {
		changes++
	}
	o := b.opts
	timeout := o.runTimeout(n) + time.Duration(changes)*(2*time.Minute+o.ShardLeaseDuration+time.Duration(n)*10*time.Millisecond)
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if !o.SharedControlPlane {
		o.Logf("sharding, %s, %d Widgets: starting a control plane", replicasText(k), n)
		if err := b.startControlPlane(ctx); err != nil {
			return nil, nil, err
		}
		defer b.stopControlPlane()
	}
	s := &shardRun{bench: b, variant: v, k: k, n: n, workers: workers}
	defer s.stop()
	res, err := s.converge(ctx)
	if err != nil {
		return nil, nil, errors.Join(err, s.diagnose())
	}
	var handoffs []Handoff
	if changes > 0 {
		o.Logf("%s: changing the ring", s)
	}
	for range grow {
		h, err := s.grow(ctx)
		if err != nil {
			return res, handoffs, errors.Join(err, s.diagnose())
		}
		handoffs = append(handoffs, h)
	}
	if kill {
		h, err := s.kill(ctx)
		if err != nil {
			return res, handoffs, errors.Join(err, s.diagnose())
		}
		handoffs = append(handoffs, h)
	}
	return res, handoffs, nil
}

func (s *shardRun) String() string {
	return fmt.Sprintf("sharding, %s, %d Widgets, %d workers", replicasText(s.k), s.n, s.workers)
}

// converge starts the replicas, creates the Widgets, waits until all are
// ready and the reconciles have stopped, and measures each replica.
func (s *shardRun) converge(ctx context.Context) (*ShardRun, error) {
	log := s.opts.Logf
	s.ns = fmt.Sprintf("bench-sharded-%d-%d-%s", s.k, s.n, rand.String(5))
	if err := s.k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: s.ns}}); err != nil {
		return nil, fmt.Errorf("creating namespace %s: %w", s.ns, err)
	}
	var err error
	if s.placements, err = watchPlacements(ctx, s.env.Config, s.k8s.Scheme(), s.ns); err != nil {
		return nil, err
	}
	for range s.k {
		if err := s.startReplica(ctx); err != nil {
			return nil, err
		}
	}
	// Every replica in every ring before the first Widget, so that no
	// handoff happens while they converge.
	if err := s.waitForRing(ctx); err != nil {
		return nil, err
	}
	log("%s: started in namespace %s; creating the Widgets", s, s.ns)

	tracker := trackReady(ctx, s.k8s, s.ns, s.n)
	before, err := s.snapshots(ctx)
	if err != nil {
		return nil, err
	}
	for i, snap := range before {
		if got := int(snap.metrics.sum(metricMaxConcurrent, labels{"controller": widget.ControllerName})); got != s.workers {
			return nil, fmt.Errorf("%s: the %s controller runs %d workers (%s), want %d", s.replicas[i].id, widget.ControllerName, got, metricMaxConcurrent, s.workers)
		}
	}
	creator := &run{bench: s.bench, n: s.n, ns: s.ns}
	if err := creator.createWidgets(ctx); err != nil {
		return nil, err
	}
	if err := s.wait(ctx, tracker.done, func() string {
		ready, _, err := tracker.state()
		return fmt.Sprintf("%d of %d Widgets ready (watch error: %v)", ready, s.n, err)
	}); err != nil {
		return nil, fmt.Errorf("waiting for every Widget to be ready: %w", err)
	}
	_, doneAt, _ := tracker.state()
	res := &ShardRun{Replicas: s.k, Convergence: doneAt.Sub(before[0].at)}
	log("%s: all ready after %s; waiting for the reconciles to stop", s, res.Convergence.Round(time.Millisecond))

	settled, settledAt, err := s.settle(ctx)
	if err != nil {
		return nil, err
	}
	res.Settled = settledAt.Sub(before[0].at)
	if _, err := s.placed(ctx, time.Now()); err != nil {
		return nil, err
	}
	final, err := s.snapshots(ctx)
	if err != nil {
		return nil, err
	}
	for i, rp := range s.replicas {
		res.Members = append(res.Members, ReplicaResult{
			ID:         rp.id,
			Leader:     rp.leads(),
			Host:       processResult(before[i].operator, settled[i].operator, final[i].operator, final[i].metrics),
			Sidecar:    processResult(before[i].sidecar, settled[i].sidecar, final[i].sidecar, nil),
			Reconciles: settled[i].reconciles() - before[i].reconciles(),
			Owned:      final[i].metrics.byLabel(metricShardOwned, "kind", labels{"ring": shardRing}),
		})
	}
	log("%s: settled after %s", s, res.Settled.Round(time.Millisecond))
	return res, nil
}

// processResult is a process's CPU from before until settled, and its
// memory at the end.
func processResult(before, settled, final procStats, m metrics) ProcessResult {
	return ProcessResult{
		CPU:     settled.CPU - before.CPU,
		PeakRSS: final.PeakRSS, RSS: final.RSS, AnonRSS: final.AnonRSS,
		HeapInuse: int64(m.sum(metricHeapInuse, nil)),
	}
}

// startReplica starts one more replica, and waits for its controller's
// workers.
func (s *shardRun) startReplica(ctx context.Context) error {
	id := fmt.Sprintf("host-%d", len(s.replicas))
	b := *s.bench
	b.opts.HostArgs = slices.Concat([]string{
		"--leader-elect", "--leader-election-namespace", s.ns,
		"--sharding", "labels", "--shard-replica-id", id, "--shard-lease-duration", s.opts.ShardLeaseDuration.String(),
	}, s.opts.HostArgs)
	v := s.variant
	v.Name = fmt.Sprintf("sharded%d-%s", s.k, id) // names its log files
	// A directory of its own: the sidecar's socket and, beside it, the
	// host's cluster service socket.
	dir, err := os.MkdirTemp("", "pb-")
	if err != nil {
		return err
	}
	rp := &replica{run: &run{bench: &b, variant: v, n: s.n, workers: s.workers, ns: s.ns, dir: dir, res: &Result{}}, id: id}
	s.replicas = append(s.replicas, rp)
	if err := rp.start(ctx); err != nil {
		return fmt.Errorf("replica %s: %w", id, err)
	}
	rp.operator.Name, rp.sidecar.Name = id+" host", id+" sidecar"
	if err := rp.operator.WaitForOutput(ctx, "Starting workers"); err != nil {
		return fmt.Errorf("replica %s: %w", id, err)
	}
	return nil
}

// live returns the replicas not killed.
func (s *shardRun) live() []*replica {
	var out []*replica
	for _, rp := range s.replicas {
		if !rp.killed {
			out = append(out, rp)
		}
	}
	return out
}

// members are the names of the live replicas: the ring's members.
func (s *shardRun) members() []string {
	var out []string
	for _, rp := range s.live() {
		out = append(out, rp.id)
	}
	return out
}

// leads reports whether the replica won the leader election (and so runs
// the sharder).
func (rp *replica) leads() bool {
	return strings.Contains(strings.ToLower(rp.operator.Output()), "successfully acquired lease")
}

// snapshots reads every live replica.
func (s *shardRun) snapshots(ctx context.Context) ([]snapshot, error) {
	var out []snapshot
	for _, rp := range s.live() {
		snap, err := rp.snapshot(ctx)
		if err != nil {
			return nil, fmt.Errorf("replica %s: %w", rp.id, err)
		}
		out = append(out, snap)
	}
	return out, nil
}

// alive fails once a process of a live replica has exited.
func (s *shardRun) alive() error {
	for _, rp := range s.live() {
		if err := rp.alive(); err != nil {
			return fmt.Errorf("replica %s: %w", rp.id, err)
		}
	}
	return nil
}

// wait waits for done, failing if ctx ends or a process of a live replica
// exits first; what describes the progress for the error.
func (s *shardRun) wait(ctx context.Context, done <-chan struct{}, what func() string) error {
	return waitAlive(ctx, done, what, s.alive)
}

// poll calls cond every shardPoll until it returns true, failing if ctx ends
// or a process of a live replica exits first.
func (s *shardRun) poll(ctx context.Context, what string, cond func() (bool, string, error)) error {
	state := ""
	for {
		if err := s.alive(); err != nil {
			return err
		}
		ok, st, err := cond()
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		if ok {
			return nil
		}
		state = st
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: %w; %s", what, ctx.Err(), state)
		case <-time.After(shardPoll):
		}
	}
}

// waitForRing waits until every live replica's ring has every live replica.
func (s *shardRun) waitForRing(ctx context.Context) error {
	want := len(s.live())
	return s.poll(ctx, fmt.Sprintf("waiting for %d replicas in every replica's ring", want), func() (bool, string, error) {
		for _, rp := range s.live() {
			m, err := scrape(ctx, rp.metrics)
			if err != nil {
				return false, "", err
			}
			if got := m.sum(metricShardMembers, labels{"ring": shardRing}); int(got) != want {
				return false, fmt.Sprintf("%s sees %.0f members", rp.id, got), nil
			}
		}
		return true, "", nil
	})
}

// placed waits until every Widget and its ConfigMap carry the label of the
// Widget's owner in the ring of the live replicas, and each live replica's
// cache holds exactly the objects labelled with it; it returns the time
// from since.
func (s *shardRun) placed(ctx context.Context, since time.Time) (time.Duration, error) {
	members := s.members()
	var at time.Time
	err := s.poll(ctx, fmt.Sprintf("waiting for every Widget and ConfigMap with its owner among %v", members), func() (bool, string, error) {
		p, err := s.placements.check(ctx, members)
		if err != nil {
			return false, "", err
		}
		if !p.done(s.n) {
			return false, p.String(), nil
		}
		now := time.Now()
		for _, rp := range s.live() {
			m, err := scrape(ctx, rp.metrics)
			if err != nil {
				return false, "", err
			}
			owned := m.byLabel(metricShardOwned, "kind", labels{"ring": shardRing})
			if int(owned[shardWidgetKind]) != p.Labelled[rp.id] || int(owned[shardConfigMapKind]) != p.LabelledConfigMaps[rp.id] {
				return false, fmt.Sprintf("%s caches %.0f Widgets and %.0f ConfigMaps; %d and %d are labelled with it",
					rp.id, owned[shardWidgetKind], owned[shardConfigMapKind], p.Labelled[rp.id], p.LabelledConfigMaps[rp.id]), nil
			}
		}
		at = now
		return true, "", nil
	})
	return at.Sub(since), err
}

// settle waits until the live replicas' reconciles have stopped: their
// count unchanged and every workqueue empty for opts.settleQuiet. It
// returns the snapshots of the last change, and when that was.
func (s *shardRun) settle(ctx context.Context) ([]snapshot, time.Time, error) {
	return settleOn(ctx, s.opts.settleQuiet, func(ctx context.Context, d time.Duration) error {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(d):
			return nil
		}
	}, s.snapshots)
}

// reconciles sums the Widget reconciles of the live replicas other than
// except (nil for all of them).
func (s *shardRun) reconciles(ctx context.Context, except *replica) (float64, error) {
	var total float64
	for _, rp := range s.live() {
		if rp == except {
			continue
		}
		n, err := s.reconcilesOf(ctx, rp)
		if err != nil {
			return 0, err
		}
		total += n
	}
	return total, nil
}

// grow starts one more replica and times its taking of its share.
func (s *shardRun) grow(ctx context.Context) (Handoff, error) {
	before := s.members()
	h := Handoff{From: len(before), To: len(before) + 1}
	startReconciles, err := s.reconciles(ctx, nil)
	if err != nil {
		return h, err
	}
	start := time.Now()
	if err := s.startReplica(ctx); err != nil {
		return h, err
	}
	h.Replica = s.replicas[len(s.replicas)-1].id
	return h, s.handoff(ctx, &h, start, before, startReconciles)
}

// kill kills (SIGKILL) the host of a live replica that does not lead, then
// stops its sidecar, and times the others' taking of its share.
func (s *shardRun) kill(ctx context.Context) (Handoff, error) {
	before := s.members()
	h := Handoff{From: len(before), To: len(before) - 1, Killed: true}
	var victim *replica
	for _, rp := range s.live() {
		if !rp.leads() {
			victim = rp
		}
	}
	if victim == nil {
		return h, errors.New("no live replica that does not lead to kill")
	}
	h.Replica = victim.id
	startReconciles, err := s.reconciles(ctx, victim)
	if err != nil {
		return h, err
	}
	start := time.Now()
	victim.operator.Kill()
	victim.killed = true
	victim.sidecar.Stop()
	return h, s.handoff(ctx, &h, start, before, startReconciles)
}

// reconcilesOf is one replica's Widget reconciles.
func (s *shardRun) reconcilesOf(ctx context.Context, rp *replica) (float64, error) {
	m, err := scrape(ctx, rp.metrics)
	if err != nil {
		return 0, fmt.Errorf("replica %s: %w", rp.id, err)
	}
	return m.widgetReconciles(), nil
}

// handoff times a ring change made at start, from the members before to
// the live replicas, whose reconciles were startReconciles then.
func (s *shardRun) handoff(ctx context.Context, h *Handoff, start time.Time, before []string, startReconciles float64) error {
	verb := "started"
	if h.Killed {
		verb = "killed"
	}
	if err := s.waitForRing(ctx); err != nil {
		return fmt.Errorf("%s %s: %w", h.Replica, verb, err)
	}
	h.Ring = time.Since(start)
	var err error
	if h.Done, err = s.placed(ctx, start); err != nil {
		return fmt.Errorf("%s %s: %w", h.Replica, verb, err)
	}
	if _, _, err := s.settle(ctx); err != nil {
		return err
	}
	end, err := s.reconciles(ctx, nil)
	if err != nil {
		return err
	}
	h.Reconciles = end - startReconciles
	if h.Moved, err = s.placements.moved(ctx, before, s.members()); err != nil {
		return err
	}
	s.opts.Logf("%s: %d → %d replicas (%s %s): %d Widgets moved; every ring updated after %s, every object with its owner after %s",
		s, h.From, h.To, h.Replica, verb, h.Moved, h.Ring.Round(time.Millisecond), h.Done.Round(time.Millisecond))
	return nil
}

// stop stops every replica.
func (s *shardRun) stop() {
	for _, rp := range s.replicas {
		rp.stop()
	}
}

// diagnose returns the tail of every replica's processes' output.
func (s *shardRun) diagnose() error {
	var errs []error
	for _, rp := range s.replicas {
		if err := rp.diagnose(); err != nil {
			errs = append(errs, fmt.Errorf("replica %s:\n%w", rp.id, err))
		}
	}
	return errors.Join(errs...)
}
