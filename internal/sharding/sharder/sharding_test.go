package sharder

import (
	"context"
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/polyop/polyop/internal/sharding"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/polyop/polyop/internal/sharding/ring"
	"github.com/polyop/polyop/internal/sharding/shardtest"
	"github.com/polyop/polyop/internal/testenv"
)

var (
	env *testenv.Env
	k8s client.Client
)

func TestMain(m *testing.M) {
	os.Exit(testenv.Suite{Env: &env, Client: &k8s}.Run(m))
}

// convergeTimeout bounds each wait for the objects to settle after a change:
// a few seconds on an idle machine, for 300 objects; the bound is for a
// machine busy with other suites.
const convergeTimeout = 3 * time.Minute

var configMapGVK = schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}

// fixture is one test's ring: a namespace of objects, the replicas and the
// sharder, all managers of this process, and the ring they share.
type fixture struct {
	t        *testing.T
	cfg      *rest.Config
	scheme   *runtime.Scheme
	ns, ring string
	source   *StaticSource
	det      *shardtest.Detector
	replicas map[string]*replica
	keys     []types.NamespacedName
}

type replica struct {
	mgr    manager.Manager
	cancel context.CancelFunc
	done   chan error
}

func newFixture(t *testing.T, ringName string) *fixture {
	cfg := rest.CopyConfig(env.Config)
	cfg.QPS = -1 // as controller-runtime's own config: the API server's fairness limits it
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	f := &fixture{t: t, cfg: cfg, scheme: scheme, ns: ringName, ring: ringName, source: NewStaticSource(nil), det: shardtest.NewDetector(time.Duration(shardtest.ObjectCount(t)/300) * time.Second), replicas: map[string]*replica{}}
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

// run starts mgr and stops it at the end of the test.
func (f *fixture) run(mgr manager.Manager) *replica {
	ctx, cancel := context.WithCancel(context.Background())
	r := &replica{mgr: mgr, cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- mgr.Start(ctx) }()
	return r
}

// startReplica starts member's replica as the host runs it: a manager whose
// cache selects the member's share, a reconciler wrapped by its shard that
// runs whether or not the replica leads, and, behind leader election, the
// sharder with a cache of its own.
func (f *fixture) startReplica(member string) {
	shard, err := NewShard(f.ring, member)
	if err != nil {
		f.t.Fatal(err)
	}
	mgr, err := manager.New(f.cfg, manager.Options{
		Scheme:                 f.scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Cache: cache.Options{
			DefaultNamespaces: map[string]cache.Config{f.ns: {}},
			ByObject:          map[client.Object]cache.ByObject{&corev1.ConfigMap{}: {Label: shard.Selector()}},
		},
		Controller:                    config.Controller{SkipNameValidation: ptr.To(true)},
		LeaderElection:                true,
		LeaderElectionID:              "sharder-" + f.ring,
		LeaderElectionNamespace:       f.ns,
		LeaderElectionReleaseOnCancel: true,
	})
	if err != nil {
		f.t.Fatal(err)
	}
	rec, err := shard.Reconciler(f.det.Reconciler(member), ReconcilerOptions{
		Reader:    mgr.GetCache(),
		Client:    mgr.GetClient(),
		NewObject: func() client.Object { return &corev1.ConfigMap{} },
	})
	if err != nil {
		f.t.Fatal(err)
	}
	if err := builder.ControllerManagedBy(mgr).Named("replica").For(&corev1.ConfigMap{}).
		WithOptions(controller.Options{MaxConcurrentReconciles: 4, NeedLeaderElection: ptr.To(false)}).Complete(rec); err != nil {
		f.t.Fatal(err)
	}
	sharderCache, err := NewCache(mgr, cache.Options{DefaultNamespaces: map[string]cache.Config{f.ns: {}}})
	if err != nil {
		f.t.Fatal(err)
	}
	if err := Add(mgr, Options{Ring: f.ring, GVK: configMapGVK, Source: f.source, Cache: sharderCache}); err != nil {
		f.t.Fatal(err)
	}
	f.replicas[member] = f.run(mgr)
}

// stop stops a manager and waits until it has: a dead replica reconciles
// nothing more.
func (f *fixture) stop(name string) {
	r := f.replicas[name]
	r.cancel()
	if err := <-r.done; err != nil && !errors.Is(err, context.Canceled) {
		f.t.Errorf("%s stopped with an error: %v", name, err)
	}
	delete(f.replicas, name)
}

// setRing publishes the ring of members.
func (f *fixture) setRing(members ...string) *ring.Ring {
	r := ring.New(members, 0)
	f.source.Set(r)
	return r
}

// createObjects creates the test's objects.
func (f *fixture) createObjects(n int) {
	f.keys = append(f.keys, shardtest.CreateConfigMaps(f.t, k8s, f.ns, n)...)
}

// objects lists the test's objects from the API server.
func (f *fixture) objects(ctx context.Context) ([]corev1.ConfigMap, error) {
	var list corev1.ConfigMapList
	if err := k8s.List(ctx, &list, client.InNamespace(f.ns)); err != nil {
		return nil, err
	}
	return list.Items, nil
}

// owners is the ring's owner of each object, by key.
func (f *fixture) owners(r *ring.Ring) map[types.NamespacedName]string {
	objs, err := f.objects(context.Background())
	if err != nil {
		f.t.Fatal(err)
	}
	out := make(map[types.NamespacedName]string, len(objs))
	for _, o := range objs {
		out[client.ObjectKeyFromObject(&o)] = r.OwnerOf(o.UID)
	}
	return out
}

// awaitConverged waits until every object is labelled with its owner in r,
// drained of no one, and each replica's cache holds exactly its share.
func (f *fixture) awaitConverged(r *ring.Ring) {
	f.t.Helper()
	start := time.Now()
	n := len(f.keys)
	testenv.Eventually(f.t, convergeTimeout, fmt.Sprintf("the %d objects labelled with their owners in the ring %v", n, r.Members()), func(ctx context.Context) error {
		objs, err := f.objects(ctx)
		if err != nil {
			return err
		}
		wrong, draining := 0, 0
		var example string
		for _, o := range objs {
			if _, ok := o.Labels[sharding.DrainLabel(f.ring)]; ok {
				draining++
			}
			if got, want := o.Labels[sharding.ShardLabel(f.ring)], r.OwnerOf(o.UID); got != want {
				wrong++
				example = fmt.Sprintf("%s is labelled %q, its owner is %q", o.Name, got, want)
			}
		}
		if len(objs) != n || wrong > 0 || draining > 0 {
			return fmt.Errorf("%d objects, %d not labelled with their owner (e.g. %s), %d draining", len(objs), wrong, example, draining)
		}
		return nil
	})
	f.t.Logf("the %d objects carry their owners' labels in the ring %v after %s", n, r.Members(), time.Since(start).Round(time.Millisecond))
	share := map[string]int{}
	for _, owner := range f.owners(r) {
		share[owner]++
	}
	for _, member := range r.Members() {
		rep := f.replicas[member]
		testenv.Eventually(f.t, convergeTimeout, fmt.Sprintf("%s's cache holding its share, %d objects", member, share[member]), func(ctx context.Context) error {
			var list corev1.ConfigMapList
			if err := rep.mgr.GetCache().List(ctx, &list, client.InNamespace(f.ns)); err != nil {
				return err
			}
			for _, o := range list.Items {
				if o.Labels[sharding.ShardLabel(f.ring)] != member {
					return fmt.Errorf("the cache holds %s, labelled %q", o.Name, o.Labels[sharding.ShardLabel(f.ring)])
				}
			}
			if len(list.Items) != share[member] {
				return fmt.Errorf("the cache holds %d objects", len(list.Items))
			}
			return nil
		})
	}
}

// awaitReconciledByOwners waits until every object whose owner is not
// before[key] (all of them when before is nil) was reconciled by its owner
// in r after mark: nothing was dropped.
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

// gauge reads a gauge of the sharder's metrics for this ring.
func (f *fixture) gauge(name string, labels map[string]string) (float64, error) {
	families, err := metrics.Registry.Gather()
	if err != nil {
		return 0, err
	}
	for _, fam := range families {
		if fam.GetName() != name {
			continue
		}
	metric:
		for _, m := range fam.GetMetric() {
			got := map[string]string{}
			for _, l := range m.GetLabel() {
				got[l.GetName()] = l.GetValue()
			}
			for k, v := range labels {
				if got[k] != v {
					continue metric
				}
			}
			if got["ring"] == f.ring {
				return m.GetGauge().GetValue() + m.GetCounter().GetValue(), nil
			}
		}
	}
	return 0, fmt.Errorf("no %s%v for ring %s", name, labels, f.ring)
}

// awaitGauges waits until the sharder reports no unassigned objects and
// each member's share.
func (f *fixture) awaitGauges(r *ring.Ring) {
	f.t.Helper()
	share := map[string]int{}
	for _, owner := range f.owners(r) {
		share[owner]++
	}
	testenv.Eventually(f.t, convergeTimeout, "the sharder's gauges showing every object assigned", func() (bool, string) {
		un, err := f.gauge("polyop_shard_unassigned_objects", nil)
		if err != nil || un != 0 {
			return false, fmt.Sprintf("unassigned %v (%v)", un, err)
		}
		for _, m := range r.Members() {
			n, err := f.gauge("polyop_shard_assigned_objects", map[string]string{"member": m})
			if err != nil || int(n) != share[m] {
				return false, fmt.Sprintf("%s assigned %v, want %d (%v)", m, n, share[m], err)
			}
		}
		return true, ""
	})
}
