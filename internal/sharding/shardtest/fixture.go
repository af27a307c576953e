package shardtest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
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
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/polyop/polyop/internal/sharding/ring"
	"github.com/polyop/polyop/internal/testenv"
)

// ConvergeTimeout bounds each wait for the replicas to settle after a ring
// change: a few seconds on an idle machine (in server mode, a Lease's expiry
// and a relist after client-go's reflector backoff), for 300 objects; the
// bound is for a machine busy with other suites.
const ConvergeTimeout = 3 * time.Minute

// Stopper is a replica a Fixture can stop: a *Replica, or a mode's replica
// that embeds one.
type Stopper interface {
	// Stop stops the replica named member and waits until it has.
	Stop(t testing.TB, member string)
}

// Fixture is one test's ring, whatever its mode: a namespace of objects
// named after the ring, the replicas (managers of this process, of the
// mode's type R), the detector they all record into, and the objects' keys.
type Fixture[R Stopper] struct {
	T *testing.T
	// Client is the test's own client of the API server.
	Client client.Client
	// Config is the replicas' config of the API server.
	Config   *rest.Config
	Scheme   *runtime.Scheme
	NS, Ring string
	Det      *Detector
	Replicas map[string]R
	Keys     []types.NamespacedName
}

// NewFixture creates the namespace of the ring ringName in the API server
// of cfg, through c, and stops the replicas still running at the end of the
// test.
func NewFixture[R Stopper](t *testing.T, cfg *rest.Config, c client.Client, ringName string) *Fixture[R] {
	cfg = rest.CopyConfig(cfg)
	cfg.QPS = -1 // as controller-runtime's own config: the API server's fairness limits it
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	f := &Fixture[R]{T: t, Client: c, Config: cfg, Scheme: scheme, NS: ringName, Ring: ringName,
		Det: NewDetector(time.Duration(ObjectCount(t)/300) * time.Second), Replicas: map[string]R{}}
	if err := c.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: f.NS}}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for m := range f.Replicas {
			f.Stop(m)
		}
	})
	return f
}

// Stop stops member's replica and waits until it has: it reconciles nothing
// more.
func (f *Fixture[R]) Stop(member string) {
	f.Replicas[member].Stop(f.T, member)
	delete(f.Replicas, member)
}

// Objects lists the test's objects from the API server.
func (f *Fixture[R]) Objects(ctx context.Context) ([]corev1.ConfigMap, error) {
	var list corev1.ConfigMapList
	if err := f.Client.List(ctx, &list, client.InNamespace(f.NS)); err != nil {
		return nil, err
	}
	return list.Items, nil
}

// Owners is the ring's owner of each object, by key.
func (f *Fixture[R]) Owners(r *ring.Ring) map[types.NamespacedName]string {
	objs, err := f.Objects(context.Background())
	if err != nil {
		f.T.Fatal(err)
	}
	out := make(map[types.NamespacedName]string, len(objs))
	for _, o := range objs {
		out[client.ObjectKeyFromObject(&o)] = r.OwnerOf(o.UID)
	}
	return out
}

// Shares is how many objects each member owns in r.
func (f *Fixture[R]) Shares(r *ring.Ring) map[string]int {
	share := map[string]int{}
	for _, owner := range f.Owners(r) {
		share[owner]++
	}
	return share
}

// CacheHoldsShare reports, as an error, whether the cache c holds other
// than n objects of the fixture's namespace, or one that belongs fails (the
// first that does).
func (f *Fixture[R]) CacheHoldsShare(ctx context.Context, c client.Reader, n int, belongs func(o *corev1.ConfigMap) error) error {
	var list corev1.ConfigMapList
	if err := c.List(ctx, &list, client.InNamespace(f.NS)); err != nil {
		return err
	}
	for i := range list.Items {
		if err := belongs(&list.Items[i]); err != nil {
			return err
		}
	}
	if len(list.Items) != n {
		return fmt.Errorf("the cache holds %d objects", len(list.Items))
	}
	return nil
}

// AwaitReconciledByOwners waits until every object whose owner in r is not
// before[key] (all of them when before is nil) was reconciled by its owner
// after mark: nothing was dropped. It returns how many moved.
func (f *Fixture[R]) AwaitReconciledByOwners(r *ring.Ring, before map[types.NamespacedName]string, mark map[types.NamespacedName]int) int {
	f.T.Helper()
	owners := f.Owners(r)
	moved := 0
	for _, k := range f.Keys {
		if before == nil || before[k] != owners[k] {
			moved++
		}
	}
	testenv.Eventually(f.T, ConvergeTimeout, fmt.Sprintf("the %d moved objects reconciled by their new owner", moved), func() (bool, string) {
		missing := 0
		var example string
		for _, k := range f.Keys {
			if (before == nil || before[k] != owners[k]) && !f.Det.ReconciledSince(mark, k, owners[k]) {
				missing++
				example = fmt.Sprintf("%s not by %s", k.Name, owners[k])
			}
		}
		return missing == 0, fmt.Sprintf("%d not reconciled yet (e.g. %s)", missing, example)
	})
	return moved
}

// ManagerOptions are a replica's manager's options, for its mode to add to:
// the fixture's scheme, no metrics or health server, a cache of the
// fixture's namespace shaped by cacheOpts, and controllers named alike in
// every replica.
func (f *Fixture[R]) ManagerOptions(cacheOpts func(*cache.Options)) manager.Options {
	opts := manager.Options{
		Scheme:                 f.Scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Cache:                  cache.Options{DefaultNamespaces: map[string]cache.Config{f.NS: {}}},
		Controller:             config.Controller{SkipNameValidation: ptr.To(true)},
	}
	if cacheOpts != nil {
		cacheOpts(&opts.Cache)
	}
	return opts
}

// AddController adds to mgr the replica's controller of ConfigMaps, which
// runs rec, four at a time, whether or not the replica leads.
func (f *Fixture[R]) AddController(mgr manager.Manager, rec reconcile.Reconciler) {
	if err := builder.ControllerManagedBy(mgr).Named("replica").For(&corev1.ConfigMap{}).
		WithOptions(controller.Options{MaxConcurrentReconciles: 4, NeedLeaderElection: ptr.To(false)}).Complete(rec); err != nil {
		f.T.Fatal(err)
	}
}

// Replica is a manager of this process that runs until stopped.
type Replica struct {
	Mgr    manager.Manager
	cancel context.CancelFunc
	done   chan error
}

// Start starts mgr.
func Start(mgr manager.Manager) *Replica {
	ctx, cancel := context.WithCancel(context.Background())
	r := &Replica{Mgr: mgr, cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- mgr.Start(ctx) }()
	return r
}

// Stop stops the manager and waits until it has.
func (r *Replica) Stop(t testing.TB, member string) {
	r.cancel()
	if err := <-r.done; err != nil && !errors.Is(err, context.Canceled) {
		t.Errorf("%s stopped with an error: %v", member, err)
	}
}
