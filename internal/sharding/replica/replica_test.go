package replica

import (
	"context"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/polyop/polyop/internal/description"
	"github.com/polyop/polyop/internal/object"
)

var (
	frigateGVK   = schema.GroupVersionKind{Group: "example.polyop.dev", Version: "v1", Kind: "Frigate"}
	configMapGVK = schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}
	secretGVK    = schema.GroupVersionKind{Version: "v1", Kind: "Secret"}
)

// shardingResolved is a sidecar "frigate" reconciling Frigates, owning
// ConfigMaps and Secrets, and watching Secrets by name.
func shardingResolved(controllers ...description.Controller) *description.Resolved {
	if len(controllers) == 0 {
		controllers = []description.Controller{{
			Name: "frigate", GVK: frigateGVK,
			Owns:    []description.Owned{{GVK: configMapGVK}, {GVK: secretGVK}},
			Watches: []description.Watch{{GVK: secretGVK}},
		}}
	}
	return &description.Resolved{
		Description: &description.Description{Name: "frigate", Controllers: controllers},
		Views: map[schema.GroupVersionKind]description.CacheView{
			frigateGVK:   {Labels: labels.SelectorFromSet(labels.Set{"tier": "gold"})},
			configMapGVK: {},
			secretGVK:    {},
		},
	}
}

func shardingOptions() PlanOptions {
	return PlanOptions{Mode: ModeLabels, LeaderElection: true, Namespace: "operators", ReplicaID: "host-a"}
}

// cacheOptions are the host's cache options for res: each kind with its
// view's label selector.
func cacheOptions(res *description.Resolved) cache.Options {
	o := cache.Options{ByObject: map[client.Object]cache.ByObject{}}
	for gvk, view := range res.Views {
		o.ByObject[object.New(gvk)] = cache.ByObject{Label: view.Labels}
	}
	return o
}

func TestPlanShardingIsOffByDefault(t *testing.T) {
	plan, err := NewPlan(shardingResolved(), PlanOptions{})
	if err != nil || plan != nil {
		t.Fatalf("planSharding with the defaults = %v, %v; want no plan", plan, err)
	}
}

func TestPlanShardingShardsThePrimaryKindAndItsChildrenNotWatchedKinds(t *testing.T) {
	plan, err := NewPlan(shardingResolved(), shardingOptions())
	if err != nil {
		t.Fatal(err)
	}
	if plan.Shard.Ring != "frigate" || plan.Shard.Member != "host-a" || plan.Namespace != "operators" || plan.Primary != frigateGVK {
		t.Errorf("plan %+v", plan)
	}
	if !plan.Sharded[frigateGVK] || !plan.Sharded[configMapGVK] || plan.Sharded[secretGVK] {
		t.Errorf("sharded kinds %v, want Frigate and ConfigMap (Secrets are watched too, so every one is cached)", plan.Sharded)
	}

	checkCacheSelectors(t, plan, map[schema.GroupVersionKind]string{
		frigateGVK:   "shard.sharding.polyop.dev/frigate=host-a,tier=gold",
		configMapGVK: "shard.sharding.polyop.dev/frigate=host-a",
		secretGVK:    "",
	})
}

// checkCacheSelectors checks the label selector plan gives the cache of each
// kind of shardingResolved: want[kind], "" for none.
func checkCacheSelectors(t *testing.T, plan *Plan, want map[schema.GroupVersionKind]string) {
	t.Helper()
	cacheOpts := cacheOptions(shardingResolved())
	plan.shardCacheOptions(cacheOpts)
	for obj, by := range cacheOpts.ByObject {
		gvk := obj.GetObjectKind().GroupVersionKind()
		got := ""
		if by.Label != nil {
			got = by.Label.String()
		}
		if got != want[gvk] {
			t.Errorf("the cache of %s selects %q, want %q", gvk.Kind, got, want[gvk])
		}
	}
}

func TestPlanShardingRefusesWhatItCannotShard(t *testing.T) {
	noLeader := shardingOptions()
	noLeader.LeaderElection = false
	unknown := shardingOptions()
	unknown.Mode = "uid"
	badID := shardingOptions()
	badID.ReplicaID = "not a label value"
	twoKinds := shardingResolved(
		description.Controller{Name: "frigate", GVK: frigateGVK},
		description.Controller{Name: "cm", GVK: configMapGVK},
	)
	for name, tc := range map[string]struct {
		res  *description.Resolved
		opts PlanOptions
		want string
	}{
		"without leader election":  {shardingResolved(), noLeader, "needs --leader-elect"},
		"an unknown mode":          {shardingResolved(), unknown, "the modes are off, labels and server"},
		"two reconciled kinds":     {twoKinds, shardingOptions(), "Frigate.example.polyop.dev/v1, ConfigMap.v1"},
		"a replica ID not a label": {shardingResolved(), badID, "--shard-replica-id"},
		"no controller at all":     {shardingResolved([]description.Controller{}...), shardingOptions(), ""},
	} {
		t.Run(name, func(t *testing.T) {
			if name == "no controller at all" {
				tc.res.Controllers = nil
				tc.want = "declares no controller"
			}
			_, err := NewPlan(tc.res, tc.opts)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("planSharding = %v, want an error saying %q", err, tc.want)
			}
		})
	}
}

// In server mode the API server selects the replica's share of the primary
// kind (by the shard selector, not a label); the children it owns are still
// selected by their shard label. No leader election is needed.
func TestPlanShardingInServerModeSelectsOnlyTheChildrenByLabel(t *testing.T) {
	o := shardingOptions()
	o.Mode = ModeServer
	o.LeaderElection = false
	plan, err := NewPlan(shardingResolved(), o)
	if err != nil {
		t.Fatal(err)
	}
	if plan.Mode != ModeServer || !plan.Sharded[frigateGVK] || !plan.Sharded[configMapGVK] || plan.Sharded[secretGVK] {
		t.Errorf("plan %+v", plan)
	}
	checkCacheSelectors(t, plan, map[schema.GroupVersionKind]string{
		frigateGVK:   "tier=gold",
		configMapGVK: "shard.sharding.polyop.dev/frigate=host-a",
		secretGVK:    "",
	})
}

func TestShardReplicaIDDefaultsToThePodName(t *testing.T) {
	t.Setenv("POD_NAME", "frigate-host-7f9c-x2")
	if id, err := shardReplicaID(""); err != nil || id != "frigate-host-7f9c-x2" {
		t.Errorf("shardReplicaID = %q, %v", id, err)
	}
	t.Setenv("POD_NAME", "")
	a, errA := shardReplicaID("")
	b, errB := shardReplicaID("")
	if errA != nil || errB != nil || a == b {
		t.Errorf("outside a pod, two replica IDs are %q (%v) and %q (%v); want two distinct names", a, errA, b, errB)
	}
}

type holding bool

func (h *holding) Holding() bool { return bool(*h) }

type countingReconciler struct{ calls int }

func (c *countingReconciler) Reconcile(context.Context, reconcile.Request) (reconcile.Result, error) {
	c.calls++
	return reconcile.Result{}, nil
}

func TestAReplicaReconcilesOnlyWhileItHoldsItsLease(t *testing.T) {
	h := holding(false)
	inner := &countingReconciler{}
	r := &holdingReconciler{inner: inner, member: &h, retry: 5 * time.Second, ring: "frigate", replica: "host-a"}
	req := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "shop", Name: "a"}}
	res, err := r.Reconcile(context.Background(), req)
	if err != nil || res.RequeueAfter != 5*time.Second || inner.calls != 0 {
		t.Errorf("not holding: %+v, %v, %d calls; want a requeue after 5s and no call", res, err, inner.calls)
	}
	h = true
	if _, err := r.Reconcile(context.Background(), req); err != nil || inner.calls != 1 {
		t.Errorf("holding: %v, %d calls; want one call", err, inner.calls)
	}
}

// fakeMember records the context it runs with.
type fakeMember struct{ started chan context.Context }

func (m *fakeMember) Start(ctx context.Context) error {
	m.started <- ctx
	<-ctx.Done()
	return nil
}

// A replica that stops gives its Lease up only once its reconciles have
// ended, and starts none meanwhile.
func TestAStoppingReplicaReleasesItsLeaseAfterItsReconciles(t *testing.T) {
	active := &activeReconciles{}
	m := &fakeMember{started: make(chan context.Context, 1)}
	l := &lastToLetGo{member: m, active: active, bound: time.Minute}
	ctx, cancel := context.WithCancel(context.Background())
	returned := make(chan error, 1)
	go func() { returned <- l.Start(ctx) }()
	memberCtx := <-m.started

	if !active.begin() {
		t.Fatal("a reconcile could not begin in a running replica")
	}
	cancel()
	if err := wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		active.mu.Lock()
		defer active.mu.Unlock()
		return active.stopping, nil
	}); err != nil {
		t.Fatal("the replica did not start stopping:", err)
	}
	// stop is waiting for the reconcile, which has not ended.
	if memberCtx.Err() != nil {
		t.Fatal("the Lease was released with a reconcile still running")
	}
	if active.begin() {
		t.Error("a reconcile began in a stopping replica")
	}
	active.end()
	select {
	case <-memberCtx.Done():
	case <-time.After(30 * time.Second):
		t.Fatal("the Lease was not released once the reconcile ended")
	}
	select {
	case err := <-returned:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Start did not return")
	}
}
