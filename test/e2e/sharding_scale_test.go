package e2e

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// scaleObjectsEnv sets how many objects TestShardedReplicasAtScale shares
// among its replicas; defaultScaleObjects by default.
const (
	scaleObjectsEnv     = "POLYOP_SHARDING_E2E_OBJECTS"
	defaultScaleObjects = 3000
)

// writers is how many objects the scale test creates or changes at once.
const writers = 16

// Host replicas share thousands of objects and their children through real
// processes, in each sharding mode, while replicas join, die and leave: one
// replica takes them all, two more join (1 → 3), a replica that does not lead
// is killed (SIGKILL) while every object is being changed, a new one joins, the
// leader (which runs the sharder) is killed the same way, another joins, and
// two leave gracefully (3 → 1); in server mode, which has no leader, the
// replica that has lived longest is the second to be killed. After each step
// every object belongs to a live replica (its label, or in server mode the
// ring of the live replicas, says which), is reconciled at its latest
// generation by that replica (its status says which), each replica's cache
// holds exactly its share of the objects and of their ConfigMaps, and no
// sidecar has seen an object in flight in another; at the end every
// generation of every object was reconciled. The test logs each replica's
// share, how long each step took to converge, and the hosts' resident memory.
func TestShardedReplicasAtScale(t *testing.T) {
	t.Parallel()
	n := defaultScaleObjects
	if v := os.Getenv(scaleObjectsEnv); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 300 {
			t.Fatalf("%s=%q: want a number of objects, at least 300", scaleObjectsEnv, v)
		}
	}
	inEveryShardingMode(t, func(t *testing.T, mode shardingMode) { testShardingAtScale(t, mode, n) })
}

func testShardingAtScale(t *testing.T, mode shardingMode, n int) {
	f := newFixture(t)
	// Leases of 15s rather than the 6s of the smaller tests: under this
	// load, on a busy machine, the API server can take seconds to answer a
	// renewal, and a leader that cannot renew its election's Lease exits.
	s := newShardRing(f, mode, "scale", 15*time.Second)
	// Each look lists every window (and every ConfigMap): not too often.
	s.n, s.children, s.quiet, s.pollInterval = n, true, true, 2*time.Second
	s.sidecar = s.testSidecar("--delay", "20ms", "--child-configmap", "--max-concurrent-reconciles", "4")
	started := map[string]*shardReplica{}
	start := func(id string) *shardReplica {
		r := s.start(id)
		started[id] = r
		return r
	}
	all := func() []*shardReplica {
		var out []*shardReplica
		for _, r := range started {
			out = append(out, r)
		}
		return out
	}
	gen := int64(1)
	step := func(live []*shardReplica, since time.Time, what string) {
		t.Helper()
		counts := s.converged(live, gen, what)
		t.Logf("%s: converged in %s", what, time.Since(since).Round(100*time.Millisecond))
		s.logShares(what, live, counts)
		s.noOverlap()
		// About 1/len(live) each: with 100 virtual nodes a member's share
		// of the hash space is within a few percent of its fair share.
		fair := float64(n) / float64(len(live))
		for _, r := range live {
			if c := counts.cached[r.id]; c < fair/2 || c > fair*3/2 {
				t.Errorf("%s: %s caches %v of %d windows, far from its fair share %.0f", what, r.id, c, n, fair)
			}
		}
	}

	// One replica takes every object.
	live := []*shardReplica{start("host-0")}
	created := time.Now()
	s.each(func(ctx context.Context, name string) error {
		return f.c.Create(ctx, f.window(name, nil))
	})
	t.Logf("%d windows created in %s, %d at once", n, time.Since(created).Round(100*time.Millisecond), writers)
	step(live, created, fmt.Sprintf("1 replica, %d windows created and reconciled", n))

	// 1 → 3: two replicas join; the sharder drains what moves to them.
	joined := time.Now()
	live = append(live, start("host-1"), start("host-2"))
	step(live, joined, "1 → 3 replicas, the objects drained and owned again")

	// A replica that does not lead dies while every object changes.
	victim := s.pickNonLeader(live)
	gen++
	killed := s.changeAndKill(gen, victim)
	live = without(live, victim)
	step(live, killed, fmt.Sprintf("%s killed while generation %d converged (its Lease lasts %s)", victim.id, gen, s.leaseDuration))

	joined = time.Now()
	live = append(live, start("host-3"))
	step(live, joined, "2 → 3 replicas")

	// The leader dies while every object changes: another replica's
	// sharder takes over. In a mode without a leader, the replica that
	// has lived longest dies.
	second, which := live[0], "the replica that lived longest"
	if mode.leaderElect {
		second, which = s.leader(live), "the leader"
	}
	gen++
	killed = s.changeAndKill(gen, second)
	live = without(live, second)
	step(live, killed, fmt.Sprintf("%s %s killed while generation %d converged", which, second.id, gen))
	if mode.leaderElect {
		t.Logf("the new leader is %s", s.leader(live).id)
	}

	joined = time.Now()
	live = append(live, start("host-4"))
	step(live, joined, "2 → 3 replicas")

	// 3 → 1: two replicas stop gracefully, in label mode the leader among
	// them; each lets go of its Lease once its reconciles have ended.
	stay := s.pickNonLeader(live)
	var stopped []string
	left := time.Now()
	for _, r := range live {
		if r != stay {
			r.host.Stop()
			stopped = append(stopped, r.id)
		}
	}
	live = []*shardReplica{stay}
	step(live, left, fmt.Sprintf("3 → 1 replicas (%s stopped gracefully)", strings.Join(stopped, " and ")))

	s.everyGenerationReconciled(all(), gen)
}

// each runs do for every window, writers at once.
func (s *shardRing) each(do func(ctx context.Context, name string) error) {
	s.f.t.Helper()
	g, ctx := errgroup.WithContext(context.Background())
	g.SetLimit(writers)
	for i := range s.n {
		name := s.window(i)
		g.Go(func() error {
			if err := do(ctx, name); err != nil {
				return fmt.Errorf("MaintenanceWindow %s/%s: %w", s.f.ns, name, err)
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		s.f.t.Fatal(err)
	}
}

// changeAndKill changes every window's spec, so that it reaches generation
// gen, and kills victim's host (SIGKILL) once a tenth of the windows have
// been reconciled at gen, while the others are still converging. It returns
// when the kill happened, once every change is written.
func (s *shardRing) changeAndKill(gen int64, victim *shardReplica) time.Time {
	t := s.f.t
	t.Helper()
	patch := client.RawPatch(types.MergePatchType, fmt.Appendf(nil, `{"spec":{"duration":"%dh"}}`, gen))
	changed := make(chan struct{})
	var changeErr error
	go func() {
		defer close(changed)
		g, ctx := errgroup.WithContext(context.Background())
		g.SetLimit(writers)
		for i := range s.n {
			u := s.f.window(s.window(i), nil)
			g.Go(func() error {
				if err := s.f.c.Patch(ctx, u, patch); err != nil {
					return fmt.Errorf("changing MaintenanceWindow %s/%s: %w", u.GetNamespace(), u.GetName(), err)
				}
				return nil
			})
		}
		changeErr = g.Wait()
	}()

	var reconciled int
	err := wait.PollUntilContextTimeout(context.Background(), time.Second, 5*time.Minute, true, func(ctx context.Context) (bool, error) {
		var err error
		reconciled, err = s.reconciledAt(ctx, gen)
		return err == nil && reconciled >= s.n/10, nil
	})
	if err != nil {
		t.Fatalf("a tenth of the windows reconciled at generation %d: not true within 5m; %d were", gen, reconciled)
	}
	killed := time.Now()
	victim.host.Kill()
	t.Logf("%s killed with %d of %d windows reconciled at generation %d", victim.id, reconciled, s.n, gen)
	<-changed
	if changeErr != nil {
		t.Fatal(changeErr)
	}
	return killed
}

// reconciledAt counts the windows whose status says they were reconciled at
// generation gen.
func (s *shardRing) reconciledAt(ctx context.Context, gen int64) (int, error) {
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(windowGVK.GroupVersion().WithKind("MaintenanceWindowList"))
	if err := s.f.c.List(ctx, list, client.InNamespace(s.f.ns)); err != nil {
		return 0, err
	}
	count := 0
	for i := range list.Items {
		if og, _, _ := unstructured.NestedInt64(list.Items[i].Object, "status", "observedGeneration"); og == gen {
			count++
		}
	}
	return count, nil
}

// everyGenerationReconciled checks the sidecars' call logs: each generation
// 1…last of every window was reconciled (none skipped), and logs how many
// reconciles each replica ran and how many generations were reconciled by
// more than one replica, one after the other (a window that moved is
// reconciled by its new owner).
func (s *shardRing) everyGenerationReconciled(replicas []*shardReplica, last int64) {
	t := s.f.t
	t.Helper()
	by := s.reconciledBy(replicas)
	perReplica := map[string]int{}
	shared, missing := 0, 0
	var example string
	for i := range s.n {
		name := s.window(i)
		for gen := int64(1); gen <= last; gen++ {
			reconcilers := by[name][gen]
			if len(reconcilers) == 0 {
				missing++
				example = fmt.Sprintf("%s at generation %d", name, gen)
			}
			if len(reconcilers) > 1 {
				shared++
			}
			for id, count := range reconcilers {
				perReplica[id] += count
			}
		}
	}
	var parts []string
	for id, count := range perReplica {
		parts = append(parts, fmt.Sprintf("%s %d", id, count))
	}
	sort.Strings(parts)
	t.Logf("reconciles per replica: %s; of %d window generations, %d were reconciled by more than one replica in turn",
		strings.Join(parts, ", "), int64(s.n)*last, shared)
	if missing > 0 {
		t.Fatalf("%d window generations were never reconciled, e.g. %s", missing, example)
	}
}
