package serverside_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

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

// convergeTimeout bounds each wait for the replicas to settle after a ring
// change: a few seconds on an idle machine (a Lease's expiry, a relist after
// client-go's reflector backoff), for 300 objects; the bound is for a
// machine busy with other suites.
const convergeTimeout = 3 * time.Minute

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
	t        *testing.T
	cfg      *rest.Config
	scheme   *runtime.Scheme
	ns, ring string
	det      *shardtest.Detector
	replicas map[string]*replica
	keys     []types.NamespacedName
}

type replica struct {
	mgr     manager.Manager
	barrier *serverside.Barrier
	reads   *countingReader
	cancel  context.CancelFunc
	done    chan error
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
	cfg := rest.CopyConfig(env.Config)
	cfg.QPS = -1 // as controller-runtime's own config: the API server's fairness limits it
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	f := &fixture{t: t, cfg: cfg, scheme: scheme, ns: ringName, ring: ringName,
		det: shardtest.NewDetector(time.Duration(shardtest.ObjectCount(t)/300) * time.Second), replicas: map[string]*replica{}}
	if err := k8s.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: f.ns}}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for m := range f.replicas {
			f.stop(m)
		}
	})
	return f
}

// startReplica starts member's replica as the host runs it in server mode:
// its Lease and the ring's Source, a cache whose ConfigMap informer lists and
// watches the member's share, the handoff barrier, and a reconciler wrapped
// by it. A replica started with keepLease leaves its Lease behind when it
// stops, as one that dies does.
func (f *fixture) startReplica(member string, keepLease bool) {
	cs := kubernetes.NewForConfigOrDie(f.cfg)
	m, err := membership.NewMember(cs, membership.MemberOptions{
		Ring: f.ring, ReplicaID: member, Namespace: f.ns, KeepLeaseOnStop: keepLease,
		LeaseDuration: leaseDuration, RenewInterval: renewInterval, RenewDeadline: renewDeadline,
	})
	if err != nil {
		f.t.Fatal(err)
	}
	src, err := membership.NewSource(cs, membership.SourceOptions{Ring: f.ring, Namespace: f.ns})
	if err != nil {
		f.t.Fatal(err)
	}
	rs := membership.NewRingSource(src)
	barrier, err := serverside.NewBarrier(serverside.BarrierOptions{Member: member, Ring: rs, Publisher: m, Leases: src, Retry: renewInterval})
	if err != nil {
		f.t.Fatal(err)
	}
	share := serverside.NewShare(rs, member)
	mgr, err := manager.New(f.cfg, manager.Options{
		Scheme:                 f.scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Cache: cache.Options{
			DefaultNamespaces: map[string]cache.Config{f.ns: {}},
			NewInformer: share.NewInformer(func(obj runtime.Object) bool {
				_, ok := obj.(*corev1.ConfigMap)
				return ok
			}),
		},
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		f.t.Fatal(err)
	}
	for _, r := range []manager.Runnable{m, src, rs, barrier} {
		if err := mgr.Add(r); err != nil {
			f.t.Fatal(err)
		}
	}
	reads := &countingReader{Reader: mgr.GetCache(), reads: map[types.NamespacedName]int{}}
	rec, err := serverside.NewReconciler(f.det.Reconciler(member), serverside.ReconcilerOptions{
		Reader:    reads,
		NewObject: func() client.Object { return &corev1.ConfigMap{} },
		Barrier:   barrier,
		Wait:      200 * time.Millisecond,
		NotOwned:  time.Second,
	})
	if err != nil {
		f.t.Fatal(err)
	}
	if err := builder.ControllerManagedBy(mgr).Named("replica").For(&corev1.ConfigMap{}).
		WithOptions(controller.Options{MaxConcurrentReconciles: 4, NeedLeaderElection: ptr.To(false)}).Complete(rec); err != nil {
		f.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &replica{mgr: mgr, barrier: barrier, reads: reads, cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- mgr.Start(ctx) }()
	f.replicas[member] = r
}

// stop stops a replica and waits until it has: it reconciles nothing more.
func (f *fixture) stop(member string) {
	r := f.replicas[member]
	r.cancel()
	if err := <-r.done; err != nil && !errors.Is(err, context.Canceled) {
		f.t.Errorf("%s stopped with an error: %v", member, err)
	}
	delete(f.replicas, member)
}

// owners is the ring's owner of each object, by key.
func (f *fixture) owners(r *ring.Ring) map[types.NamespacedName]string {
	var list corev1.ConfigMapList
	if err := k8s.List(context.Background(), &list, client.InNamespace(f.ns)); err != nil {
		f.t.Fatal(err)
	}
	out := make(map[types.NamespacedName]string, len(list.Items))
	for _, o := range list.Items {
		out[client.ObjectKeyFromObject(&o)] = r.OwnerOf(o.UID)
	}
	return out
}

// awaitConverged waits until every replica of members has adopted their
// ring, every other member with it, and each replica's cache holds exactly
// its share.
func (f *fixture) awaitConverged(members ...string) *ring.Ring {
	f.t.Helper()
	start := time.Now()
	want := ring.New(members, 0)
	share := map[string]int{}
	for _, owner := range f.owners(want) {
		share[owner]++
	}
	for _, member := range members {
		rep := f.replicas[member]
		testenv.Eventually(f.t, convergeTimeout, fmt.Sprintf("%s reconciling by the ring %v, its cache holding its share of %d objects", member, members, share[member]), func(ctx context.Context) error {
			adopted, cleared := rep.barrier.Adopted()
			if adopted.ID() != want.ID() || !cleared {
				return fmt.Errorf("it adopted the ring %v (every member with it: %v)", adopted.Members(), cleared)
			}
			var list corev1.ConfigMapList
			if err := rep.mgr.GetCache().List(ctx, &list, client.InNamespace(f.ns)); err != nil {
				return err
			}
			for _, o := range list.Items {
				if owner := want.OwnerOf(o.UID); owner != member {
					return fmt.Errorf("the cache holds %s, which the ring gives %s", o.Name, owner)
				}
			}
			if len(list.Items) != share[member] {
				return fmt.Errorf("the cache holds %d objects", len(list.Items))
			}
			return nil
		})
	}
	f.t.Logf("the replicas %v reconcile by their ring, each caching its share %v, after %s", members, share, time.Since(start).Round(time.Millisecond))
	return want
}

// awaitReconciledByOwners waits until every object whose owner in r is not
// before[key] (all of them when before is nil) was reconciled by its owner
// after mark: nothing was dropped. It returns how many moved.
func (f *fixture) awaitReconciledByOwners(r *ring.Ring, before map[types.NamespacedName]string, mark map[types.NamespacedName]int) int {
	f.t.Helper()
	owners := f.owners(r)
	moved := 0
	for _, k := range f.keys {
		if before == nil || before[k] != owners[k] {
			moved++
		}
	}
	testenv.Eventually(f.t, convergeTimeout, fmt.Sprintf("the %d moved objects reconciled by their new owner", moved), func() (bool, string) {
		missing := 0
		var example string
		for _, k := range f.keys {
			if (before == nil || before[k] != owners[k]) && !f.det.ReconciledSince(mark, k, owners[k]) {
				missing++
				example = fmt.Sprintf("%s not by %s", k.Name, owners[k])
			}
		}
		return missing == 0, fmt.Sprintf("%d not reconciled yet (e.g. %s)", missing, example)
	})
	return moved
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
	f.keys = shardtest.CreateConfigMaps(t, k8s, f.ns, shardtest.ObjectCount(t))
	r := f.awaitConverged("a", "b", "c")
	f.awaitReconciledByOwners(r, nil, nil)
	f.det.CheckNoOverlap(t)

	// c dies: once its Lease expires, a and b share its objects.
	before, mark := f.owners(r), f.det.Mark()
	f.stop("c")
	r = f.awaitConverged("a", "b")
	moved := f.awaitReconciledByOwners(r, before, mark)
	t.Logf("3 → 2: %d objects moved", moved)
	f.det.CheckNoOverlap(t)

	// c comes back: its objects move to it from a and b, once they let go.
	before, mark = f.owners(r), f.det.Mark()
	f.startReplica("c", true)
	r = f.awaitConverged("a", "b", "c")
	moved = f.awaitReconciledByOwners(r, before, mark)
	t.Logf("2 → 3: %d objects moved", moved)
	f.det.CheckNoOverlap(t)
}

// One replica reconciles everything; two more join and take their shares
// from it; they leave (deleting their Leases) and it takes everything back.
func TestServerSideOneReplicaGrowsToThreeAndBack(t *testing.T) {
	f := newFixture(t, "server-one")
	f.startReplica("a", false)
	f.keys = shardtest.CreateConfigMaps(t, k8s, f.ns, shardtest.ObjectCount(t))
	r := f.awaitConverged("a")
	f.awaitReconciledByOwners(r, nil, nil)

	before, mark := f.owners(r), f.det.Mark()
	f.startReplica("b", false)
	f.startReplica("c", false)
	r = f.awaitConverged("a", "b", "c")
	moved := f.awaitReconciledByOwners(r, before, mark)
	t.Logf("1 → 3: %d objects moved", moved)
	f.det.CheckNoOverlap(t)

	before, mark = f.owners(r), f.det.Mark()
	f.stop("b")
	f.stop("c")
	r = f.awaitConverged("a")
	moved = f.awaitReconciledByOwners(r, before, mark)
	t.Logf("3 → 1: %d objects moved", moved)
	f.det.CheckNoOverlap(t)
}

// An object whose reconcile is in flight in its old owner is not reconciled
// by its new owner until that reconcile has ended, however long it lasts:
// the new owner has the object in its cache and is asked to reconcile it
// again and again, and waits.
func TestAnObjectMovesOnlyOnceItsOldOwnerEndedItsReconcile(t *testing.T) {
	f := newFixture(t, "server-hold")
	f.startReplica("a", false)
	f.keys = shardtest.CreateConfigMaps(t, k8s, f.ns, 50)
	r := f.awaitConverged("a")
	f.awaitReconciledByOwners(r, nil, nil)

	// An object that b will own: a's next reconcile of it stays in flight.
	var moving types.NamespacedName
	for k, owner := range f.owners(ring.New([]string{"a", "b"}, 0)) {
		if owner == "b" {
			moving = k
			break
		}
	}
	release := f.det.Hold("a", moving)
	t.Cleanup(release)
	testenv.Eventually(t, convergeTimeout, fmt.Sprintf("a reconciling %s, held in flight", moving.Name), func() (bool, string) {
		return f.det.Held("a", moving), "not yet"
	})

	f.startReplica("b", false)
	b := f.replicas["b"]
	testenv.Eventually(t, convergeTimeout, fmt.Sprintf("b caching %s and asked to reconcile it three times", moving.Name), func(ctx context.Context) error {
		if err := b.mgr.GetCache().Get(ctx, moving, &corev1.ConfigMap{}); err != nil {
			return err
		}
		if n := b.reads.count(moving); n < 3 {
			return fmt.Errorf("asked %d times", n)
		}
		return nil
	})
	if f.det.ReconciledSince(nil, moving, "b") {
		t.Fatalf("b reconciled %s while a's reconcile of it was in flight", moving.Name)
	}
	mark := f.det.Mark()
	release()
	testenv.Eventually(t, convergeTimeout, fmt.Sprintf("b reconciling %s once a's reconcile ended", moving.Name), func() (bool, string) {
		return f.det.ReconciledSince(mark, moving, "b"), "not yet"
	})
	f.awaitConverged("a", "b")
	f.det.CheckNoOverlap(t)
}
