package sharder

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/polyop/polyop/internal/sharding"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

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

var configMapGVK = schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}

// fixture is one test's ring: a namespace of objects, the replicas and the
// sharder, all managers of this process, and the ring they share.
type fixture struct {
	*shardtest.Fixture[*shardtest.Replica]
	source *StaticSource
}

func newFixture(t *testing.T, ringName string) *fixture {
	return &fixture{Fixture: shardtest.NewFixture[*shardtest.Replica](t, env.Config, k8s, ringName), source: NewStaticSource(nil)}
}

// startReplica starts member's replica as the host runs it: a manager whose
// cache selects the member's share, a reconciler wrapped by its shard that
// runs whether or not the replica leads, and, behind leader election, the
// sharder with a cache of its own.
func (f *fixture) startReplica(member string) {
	shard, err := NewShard(f.Ring, member)
	if err != nil {
		f.T.Fatal(err)
	}
	opts := f.ManagerOptions(func(o *cache.Options) {
		o.ByObject = map[client.Object]cache.ByObject{&corev1.ConfigMap{}: {Label: shard.Selector()}}
	})
	opts.LeaderElection = true
	opts.LeaderElectionID = "sharder-" + f.Ring
	opts.LeaderElectionNamespace = f.NS
	opts.LeaderElectionReleaseOnCancel = true
	mgr, err := manager.New(f.Config, opts)
	if err != nil {
		f.T.Fatal(err)
	}
	rec, err := shard.Reconciler(f.Det.Reconciler(member), ReconcilerOptions{
		Reader:    mgr.GetCache(),
		Client:    mgr.GetClient(),
		NewObject: func() client.Object { return &corev1.ConfigMap{} },
	})
	if err != nil {
		f.T.Fatal(err)
	}
	f.AddController(mgr, rec)
	sharderCache, err := NewCache(mgr, cache.Options{DefaultNamespaces: map[string]cache.Config{f.NS: {}}})
	if err != nil {
		f.T.Fatal(err)
	}
	if err := Add(mgr, Options{Ring: f.Ring, GVK: configMapGVK, Source: f.source, Cache: sharderCache}); err != nil {
		f.T.Fatal(err)
	}
	f.Replicas[member] = shardtest.Start(mgr)
}

// setRing publishes the ring of members.
func (f *fixture) setRing(members ...string) *ring.Ring {
	r := ring.New(members, 0)
	f.source.Set(r)
	return r
}

// createObjects creates the test's objects.
func (f *fixture) createObjects(n int) {
	f.Keys = append(f.Keys, shardtest.CreateConfigMaps(f.T, k8s, f.NS, n)...)
}

// awaitConverged waits until every object is labelled with its owner in r,
// drained of no one, and each replica's cache holds exactly its share.
func (f *fixture) awaitConverged(r *ring.Ring) {
	f.T.Helper()
	start := time.Now()
	n := len(f.Keys)
	testenv.Eventually(f.T, shardtest.ConvergeTimeout, fmt.Sprintf("the %d objects labelled with their owners in the ring %v", n, r.Members()), func(ctx context.Context) error {
		objs, err := f.Objects(ctx)
		if err != nil {
			return err
		}
		wrong, draining := 0, 0
		var example string
		for _, o := range objs {
			if _, ok := o.Labels[sharding.DrainLabel(f.Ring)]; ok {
				draining++
			}
			if got, want := o.Labels[sharding.ShardLabel(f.Ring)], r.OwnerOf(o.UID); got != want {
				wrong++
				example = fmt.Sprintf("%s is labelled %q, its owner is %q", o.Name, got, want)
			}
		}
		if len(objs) != n || wrong > 0 || draining > 0 {
			return fmt.Errorf("%d objects, %d not labelled with their owner (e.g. %s), %d draining", len(objs), wrong, example, draining)
		}
		return nil
	})
	f.T.Logf("the %d objects carry their owners' labels in the ring %v after %s", n, r.Members(), time.Since(start).Round(time.Millisecond))
	share := f.Shares(r)
	for _, member := range r.Members() {
		rep := f.Replicas[member]
		testenv.Eventually(f.T, shardtest.ConvergeTimeout, fmt.Sprintf("%s's cache holding its share, %d objects", member, share[member]), func(ctx context.Context) error {
			return f.CacheHoldsShare(ctx, rep.Mgr.GetCache(), share[member], func(o *corev1.ConfigMap) error {
				if o.Labels[sharding.ShardLabel(f.Ring)] != member {
					return fmt.Errorf("the cache holds %s, labelled %q", o.Name, o.Labels[sharding.ShardLabel(f.Ring)])
				}
				return nil
			})
		})
	}
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
			if got["ring"] == f.Ring {
				return m.GetGauge().GetValue() + m.GetCounter().GetValue(), nil
			}
		}
	}
	return 0, fmt.Errorf("no %s%v for ring %s", name, labels, f.Ring)
}

// awaitGauges waits until the sharder reports no unassigned objects and
// each member's share.
func (f *fixture) awaitGauges(r *ring.Ring) {
	f.T.Helper()
	share := f.Shares(r)
	testenv.Eventually(f.T, shardtest.ConvergeTimeout, "the sharder's gauges showing every object assigned", func() (bool, string) {
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
