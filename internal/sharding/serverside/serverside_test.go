package serverside_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/polyop/polyop/internal/sharding/membership"
	"github.com/polyop/polyop/internal/sharding/ring"
	"github.com/polyop/polyop/internal/sharding/serverside"
	"github.com/polyop/polyop/internal/sharding/shardtest"
	"github.com/polyop/polyop/internal/testenv"
)

var (
	env *testenv.Env
	k8s client.Client
)

func TestMain(m *testing.M) {
	os.Exit(testenv.Suite{FeatureGates: []string{"ShardedListAndWatch"}, Env: &env, Client: &k8s}.Run(m))
}

// The test's Leases: short, so that a member that dies drops out soon.
const (
	leaseDuration = 3 * time.Second
	renewInterval = 500 * time.Millisecond
	renewDeadline = 2 * time.Second
)

// fixture is one test's ring: a namespace of objects (and of the ring's
// Leases), the replicas, managers of this process, and the detector they
// all record into.
type fixture struct {
	*shardtest.Fixture[*replica]
}

// replica is a member's manager, its handoff barrier, and the reads of its
// reconciler.
type replica struct {
	*shardtest.Replica
	barrier *serverside.Barrier
	reads   *countingReader
}

// countingReader counts the reads of each object from the replica's cache:
// each is the start of a reconcile, begun or not.
type countingReader struct {
	client.Reader
	mu    sync.Mutex
	reads map[types.NamespacedName]int
}

func (c *countingReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	c.mu.Lock()
	c.reads[key]++
	c.mu.Unlock()
	return c.Reader.Get(ctx, key, obj, opts...)
}

func (c *countingReader) count(key types.NamespacedName) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.reads[key]
}

func newFixture(t *testing.T, ringName string) *fixture {
	return &fixture{shardtest.NewFixture[*replica](t, env.Config, k8s, ringName)}
}

// startReplica starts member's replica as the host runs it in server mode:
// its Lease and the ring's Source, a cache whose ConfigMap informer lists and
// watches the member's share, the handoff barrier, and a reconciler wrapped
// by it. A replica started with keepLease leaves its Lease behind when it
// stops, as one that dies does.
func (f *fixture) startReplica(member string, keepLease bool) {
	cs := kubernetes.NewForConfigOrDie(f.Config)
	m, err := membership.NewMember(cs.CoordinationV1(), membership.MemberOptions{
		Ring: f.Ring, ReplicaID: member, Namespace: f.NS, KeepLeaseOnStop: keepLease,
		LeaseDuration: leaseDuration, RenewInterval: renewInterval, RenewDeadline: renewDeadline,
	})
	if err != nil {
		f.T.Fatal(err)
	}
	src, err := membership.NewSource(cs.CoordinationV1(), membership.SourceOptions{Ring: f.Ring, Namespace: f.NS})
	if err != nil {
		f.T.Fatal(err)
	}
	rs := membership.NewRingSource(src)
	barrier, err := serverside.NewBarrier(serverside.BarrierOptions{Member: member, Ring: rs, Publisher: m, Leases: src, Retry: renewInterval})
	if err != nil {
		f.T.Fatal(err)
	}
	share := serverside.NewShare(rs, member)
	mgr, err := manager.New(f.Config, f.ManagerOptions(func(o *cache.Options) {
		o.NewInformer = share.NewInformer(func(obj runtime.Object) bool {
			_, ok := obj.(*corev1.ConfigMap)
			return ok
		})
	}))
	if err != nil {
		f.T.Fatal(err)
	}
	for _, r := range []manager.Runnable{m, src, rs, barrier} {
		if err := mgr.Add(r); err != nil {
			f.T.Fatal(err)
		}
	}
	reads := &countingReader{Reader: mgr.GetCache(), reads: map[types.NamespacedName]int{}}
	rec, err := serverside.NewReconciler(f.Det.Reconciler(member), serverside.ReconcilerOptions{
		Reader:    reads,
		NewObject: func() client.Object { return &corev1.ConfigMap{} },
		Barrier:   barrier,
		Wait:      200 * time.Millisecond,
		NotOwned:  time.Second,
	})
	if err != nil {
		f.T.Fatal(err)
	}
	f.AddController(mgr, rec)
	f.Replicas[member] = &replica{Replica: shardtest.Start(mgr), barrier: barrier, reads: reads}
}

// awaitConverged waits until every replica of members has adopted their
// ring, every other member with it, and each replica's cache holds exactly
// its share.
func (f *fixture) awaitConverged(members ...string) *ring.Ring {
	f.T.Helper()
	start := time.Now()
	want := ring.New(members, 0)
	share := f.Shares(want)
	for _, member := range members {
		rep := f.Replicas[member]
		testenv.Eventually(f.T, shardtest.ConvergeTimeout, fmt.Sprintf("%s reconciling by the ring %v, its cache holding its share of %d objects", member, members, share[member]), func(ctx context.Context) error {
			adopted, cleared := rep.barrier.Adopted()
			// The adopted ring's ID also tells its members' incarnations
			// (ring.Ring.Incarnated): the members say which ring it is.
			if !slices.Equal(adopted.Members(), want.Members()) || !cleared {
				return fmt.Errorf("it adopted the ring %v (every member with it: %v)", adopted.Members(), cleared)
			}
			return f.CacheHoldsShare(ctx, rep.Mgr.GetCache(), share[member], func(o *corev1.ConfigMap) error {
				if owner := want.OwnerOf(o.UID); owner != member {
					return fmt.Errorf("the cache holds %s, which the ring gives %s", o.Name, owner)
				}
				return nil
			})
		})
	}
	f.T.Logf("the replicas %v reconcile by their ring, each caching its share %v, after %s", members, share, time.Since(start).Round(time.Millisecond))
	return want
}

// Three replicas list and watch their shares through the API server's
// sharded list and watch, each reconciling exactly its objects; when one
// dies (its Lease left to expire) its objects move to the two others, and
// when it comes back they move back, each reconciled by its new owner and
// none by two replicas at once.
func TestServerSideReplicasShareTheObjectsAndHandThemOver(t *testing.T) {
	f := newFixture(t, "server-three")
	for _, m := range []string{"a", "b", "c"} {
		f.startReplica(m, true)
	}
	f.Keys = shardtest.CreateConfigMaps(t, k8s, f.NS, shardtest.ObjectCount(t))
	r := f.awaitConverged("a", "b", "c")
	f.AwaitReconciledByOwners(r, nil, nil)
	f.Det.CheckNoOverlap(t)

	// c dies: once its Lease expires, a and b share its objects.
	before, mark := f.Owners(r), f.Det.Mark()
	f.Stop("c")
	r = f.awaitConverged("a", "b")
	moved := f.AwaitReconciledByOwners(r, before, mark)
	t.Logf("3 → 2: %d objects moved", moved)
	f.Det.CheckNoOverlap(t)

	// c comes back: its objects move to it from a and b, once they let go.
	before, mark = f.Owners(r), f.Det.Mark()
	f.startReplica("c", true)
	r = f.awaitConverged("a", "b", "c")
	moved = f.AwaitReconciledByOwners(r, before, mark)
	t.Logf("2 → 3: %d objects moved", moved)
	f.Det.CheckNoOverlap(t)
}

// One replica reconciles everything; two more join and take their shares
// from it; they leave (deleting their Leases) and it takes everything back.
func TestServerSideOneReplicaGrowsToThreeAndBack(t *testing.T) {
	f := newFixture(t, "server-one")
	f.startReplica("a", false)
	f.Keys = shardtest.CreateConfigMaps(t, k8s, f.NS, shardtest.ObjectCount(t))
	r := f.awaitConverged("a")
	f.AwaitReconciledByOwners(r, nil, nil)

	before, mark := f.Owners(r), f.Det.Mark()
	f.startReplica("b", false)
	f.startReplica("c", false)
	r = f.awaitConverged("a", "b", "c")
	moved := f.AwaitReconciledByOwners(r, before, mark)
	t.Logf("1 → 3: %d objects moved", moved)
	f.Det.CheckNoOverlap(t)

	before, mark = f.Owners(r), f.Det.Mark()
	f.Stop("b")
	f.Stop("c")
	r = f.awaitConverged("a")
	moved = f.AwaitReconciledByOwners(r, before, mark)
	t.Logf("3 → 1: %d objects moved", moved)
	f.Det.CheckNoOverlap(t)
}

// An object whose reconcile is in flight in its old owner is not reconciled
// by its new owner until that reconcile has ended, however long it lasts:
// the new owner has the object in its cache and is asked to reconcile it
// again and again, and waits.
func TestAnObjectMovesOnlyOnceItsOldOwnerEndedItsReconcile(t *testing.T) {
	f := newFixture(t, "server-hold")
	f.startReplica("a", false)
	f.Keys = shardtest.CreateConfigMaps(t, k8s, f.NS, 50)
	r := f.awaitConverged("a")
	f.AwaitReconciledByOwners(r, nil, nil)

	// An object that b will own: a's next reconcile of it stays in flight.
	var moving types.NamespacedName
	for k, owner := range f.Owners(ring.New([]string{"a", "b"}, 0)) {
		if owner == "b" {
			moving = k
			break
		}
	}
	release := f.Det.Hold("a", moving)
	t.Cleanup(release)
	testenv.Eventually(t, shardtest.ConvergeTimeout, fmt.Sprintf("a reconciling %s, held in flight", moving.Name), func() (bool, string) {
		return f.Det.Held("a", moving), "not yet"
	})

	f.startReplica("b", false)
	b := f.Replicas["b"]
	testenv.Eventually(t, shardtest.ConvergeTimeout, fmt.Sprintf("b caching %s and asked to reconcile it three times", moving.Name), func(ctx context.Context) error {
		if err := b.Mgr.GetCache().Get(ctx, moving, &corev1.ConfigMap{}); err != nil {
			return err
		}
		if n := b.reads.count(moving); n < 3 {
			return fmt.Errorf("asked %d times", n)
		}
		return nil
	})
	if f.Det.ReconciledSince(nil, moving, "b") {
		t.Fatalf("b reconciled %s while a's reconcile of it was in flight", moving.Name)
	}
	mark := f.Det.Mark()
	release()
	testenv.Eventually(t, shardtest.ConvergeTimeout, fmt.Sprintf("b reconciling %s once a's reconcile ended", moving.Name), func() (bool, string) {
		return f.Det.ReconciledSince(mark, moving, "b"), "not yet"
	})
	f.awaitConverged("a", "b")
	f.Det.CheckNoOverlap(t)
}
