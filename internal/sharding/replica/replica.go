package replica

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/polyop/polyop/internal/description"
	"github.com/polyop/polyop/internal/fencing"
	"github.com/polyop/polyop/internal/object"
	"github.com/polyop/polyop/internal/sharding"
	"github.com/polyop/polyop/internal/sharding/membership"
	"github.com/polyop/polyop/internal/sharding/rejoin"
	"github.com/polyop/polyop/internal/sharding/serverside"
	"github.com/polyop/polyop/internal/sharding/sharder"
)

// The sharding modes, the values of the host's --sharding.
const (
	// ModeOff runs the host unsharded: the leader reconciles every object.
	ModeOff = "off"
	// ModeLabels shards by label: the leader's sharder labels each object
	// of the primary kind with its replica, and each replica caches and
	// reconciles the objects labelled with it.
	ModeLabels = "labels"
	// ModeServer shards by the API server's sharded list and watch: each
	// replica's informers of the primary kind list and watch its ranges of
	// the hash space (the ShardedListAndWatch feature gate), and a barrier
	// through the replicas' Leases hands objects over.
	ModeServer = "server"
)

// serviceAccountNamespace is where a pod finds its namespace.
const serviceAccountNamespace = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

// PlanOptions are the host's sharding options, as its flags set them.
type PlanOptions struct {
	// Mode is ModeOff, ModeLabels or ModeServer (--sharding). Defaults to
	// "": ModeOff.
	Mode string
	// LeaderElection says whether the host elects a leader (--leader-elect),
	// which ModeLabels needs.
	LeaderElection bool
	// ReplicaID names the replica in the ring (--shard-replica-id).
	// Defaults to "": $POD_NAME, else the hostname and a random suffix.
	ReplicaID string
	// Namespace is where the ring's Leases live
	// (--leader-election-namespace). Defaults to "": $POD_NAMESPACE, else the
	// pod's own.
	Namespace string
}

// Plan is what sharding changes in a host: the mode, the ring, the
// replica's shard, the primary kind, and the kinds its cache holds only the
// replica's share of.
type Plan struct {
	// Mode is ModeLabels or ModeServer.
	Mode string
	// Shard is the ring, named after the sidecar, and the replica's member
	// in it.
	Shard sharder.Shard
	// Namespace is the namespace of the ring's Leases.
	Namespace string
	// Primary is the reconciled kind whose objects are shared.
	Primary schema.GroupVersionKind
	// Sharded are the primary kind and the owned kinds whose cache holds
	// the replica's share: by the shard label, or for the primary kind in
	// server mode by the shard selector.
	Sharded map[schema.GroupVersionKind]bool
}

// NewPlan checks the sharding options against the resolved description
// and returns the plan, or nil when sharding is off.
func NewPlan(res *description.Resolved, opts PlanOptions) (*Plan, error) {
	switch opts.Mode {
	case "", ModeOff:
		return nil, nil
	case ModeLabels, ModeServer:
	default:
		return nil, fmt.Errorf("--sharding=%s: the modes are %s, %s and %s", opts.Mode, ModeOff, ModeLabels, ModeServer)
	}
	if opts.Mode == ModeLabels && !opts.LeaderElection {
		return nil, fmt.Errorf("--sharding=%s needs --leader-elect: the elected replica labels the objects with their replicas", opts.Mode)
	}
	var primaries []schema.GroupVersionKind
	for _, c := range res.Controllers {
		if !slices.Contains(primaries, c.GVK) {
			primaries = append(primaries, c.GVK)
		}
	}
	switch len(primaries) {
	case 0:
		return nil, fmt.Errorf("--sharding=%s: sidecar %s declares no controller, so there is nothing to shard", opts.Mode, res.Name)
	case 1:
	default:
		names := make([]string, len(primaries))
		for i, gvk := range primaries {
			names[i] = description.GVKString(gvk)
		}
		return nil, fmt.Errorf("--sharding=%s shards the objects of one reconciled kind, and sidecar %s reconciles %s: run a host per kind, or run this one unsharded",
			opts.Mode, res.Name, strings.Join(names, ", "))
	}
	replicaID, err := shardReplicaID(opts.ReplicaID)
	if err != nil {
		return nil, err
	}
	shard, err := sharder.NewShard(res.Name, replicaID)
	if err != nil {
		return nil, fmt.Errorf("--sharding=%s (the ring is named after the sidecar, the member after --shard-replica-id): %w", opts.Mode, err)
	}
	namespace, err := shardNamespace(opts.Namespace)
	if err != nil {
		return nil, err
	}
	return &Plan{Mode: opts.Mode, Shard: shard, Namespace: namespace, Primary: primaries[0], Sharded: shardedKinds(res, primaries[0])}, nil
}

// shardedKinds are the kinds whose cache holds only the replica's share:
// the primary kind, and each kind its controllers own (a child carries its
// controller's shard label), unless the kind is also watched or declared for
// cached reads, which must see every object of it.
func shardedKinds(res *description.Resolved, primary schema.GroupVersionKind) map[schema.GroupVersionKind]bool {
	everything := map[schema.GroupVersionKind]bool{}
	for gvk := range res.Declared {
		everything[gvk] = true
	}
	for _, c := range res.Controllers {
		for _, w := range c.Watches {
			everything[w.GVK] = true
		}
	}
	out := map[schema.GroupVersionKind]bool{primary: true}
	for _, c := range res.Controllers {
		for _, o := range c.Owns {
			if !everything[o.GVK] && o.GVK != primary {
				out[o.GVK] = true
			}
		}
	}
	return out
}

// shardReplicaID is the replica's name in the ring: the flag's value, else
// $POD_NAME, else the hostname and a random suffix (two processes on one
// machine must not share a name).
func shardReplicaID(flagValue string) (string, error) {
	if flagValue != "" {
		return flagValue, nil
	}
	if pod := os.Getenv("POD_NAME"); pod != "" {
		return pod, nil
	}
	host, err := os.Hostname()
	if err != nil || host == "" {
		return "", fmt.Errorf("--sharding needs a replica name: set --shard-replica-id or $POD_NAME (the hostname is unknown: %w)", err)
	}
	suffix := make([]byte, 3)
	if _, err := rand.Read(suffix); err != nil {
		return "", err
	}
	id := strings.ToLower(host)
	if len(id) > 56 {
		id = id[:56]
	}
	return strings.Trim(id, "-.") + "-" + hex.EncodeToString(suffix), nil
}

// shardNamespace is where the ring's Leases live: the leader election's
// namespace, else $POD_NAMESPACE, else the pod's own.
func shardNamespace(flagValue string) (string, error) {
	if flagValue != "" {
		return flagValue, nil
	}
	if ns := os.Getenv("POD_NAMESPACE"); ns != "" {
		return ns, nil
	}
	if b, err := os.ReadFile(serviceAccountNamespace); err == nil && strings.TrimSpace(string(b)) != "" {
		return strings.TrimSpace(string(b)), nil
	}
	return "", fmt.Errorf("--sharding needs the namespace of the ring's Leases: set --leader-election-namespace or $POD_NAMESPACE (outside a pod)")
}

// shardCacheOptions makes the cache of each sharded kind select the shard
// label, beside the selector it already has; in server mode, the primary
// kind's cache selects the shard selector instead (Runtime.CacheOptions).
func (p *Plan) shardCacheOptions(o cache.Options) {
	reqs, _ := p.Shard.Selector().Requirements()
	for obj, by := range o.ByObject {
		gvk := obj.GetObjectKind().GroupVersionKind()
		if !p.Sharded[gvk] || (p.Mode == ModeServer && gvk == p.Primary) {
			continue
		}
		if by.Label == nil {
			by.Label = p.Shard.Selector()
		} else {
			by.Label = by.Label.Add(reqs...)
		}
		o.ByObject[obj] = by
	}
}

// UpdateLabels are the labels whose changes reconcile an object of the
// primary kind again: in label mode, the shard and drain labels, which hand
// it over; none in server mode.
func (p *Plan) UpdateLabels() []string {
	if p.Mode != ModeLabels {
		return nil
	}
	return []string{sharding.ShardLabel(p.Shard.Ring), sharding.DrainLabel(p.Shard.Ring)}
}

// Options configure a Runtime.
type Options struct {
	// LeaseDuration is how long the replica's Lease in the ring stays live
	// after each renewal (--shard-lease-duration). Defaults to
	// membership.DefaultLeaseDuration.
	LeaseDuration time.Duration
	// RenewInterval is how often the replica renews its Lease
	// (--shard-renew-interval). Defaults to a third of LeaseDuration.
	RenewInterval time.Duration
	// ReleaseAfter bounds how long a stopping replica waits for its
	// reconciles to end before it releases its Lease: the deadline of a
	// Reconcile call. Defaults to 30s.
	ReleaseAfter time.Duration
}

// Runtime is the sharding of a running host, in either mode: the
// replica's membership (its Lease and the ring), and what reconciles by it.
type Runtime struct {
	plan   *Plan
	member *membership.Member
	source *membership.Source
	ring   *membership.RingSource
	// share is the replica's share of the hash space (server mode).
	share *serverside.Share
	// barrier lets the replica's reconciles begin (server mode).
	barrier *serverside.Barrier
	// inFlight tracks the replica's reconciles for the handoff (label mode).
	inFlight *sharder.InFlight
	// active counts the replica's reconciles, so that it gives its Lease up
	// only once they have ended.
	active *activeReconciles
	// retry is how soon a replica that is not holding its Lease looks at an
	// object again.
	retry time.Duration
	// releaseAfter bounds the wait for the reconciles before the Lease is
	// released.
	releaseAfter time.Duration
}

// New builds the replica's membership (before the manager: in server mode
// the cache's informers list by the ring).
func New(cfg *rest.Config, httpClient *http.Client, plan *Plan, opts Options) (*Runtime, error) {
	cs, err := coordinationv1client.NewForConfigAndClient(cfg, httpClient)
	if err != nil {
		return nil, fmt.Errorf("sharding: building the client of the ring's Leases: %w", err)
	}
	ringName, replicaID := plan.Shard.Ring, plan.Shard.Member
	member, err := membership.NewMember(cs, membership.MemberOptions{
		Ring: ringName, ReplicaID: replicaID, Namespace: plan.Namespace,
		LeaseDuration: opts.LeaseDuration, RenewInterval: opts.RenewInterval,
		// A replica back from a lapse reconciles once its view is fresh
		// (rejoin.Rejoiner).
		ConfirmRejoin: true,
	})
	if err != nil {
		return nil, fmt.Errorf("%w (see --shard-lease-duration and --shard-renew-interval)", err)
	}
	source, err := membership.NewSource(cs, membership.SourceOptions{Ring: ringName, Namespace: plan.Namespace, ReplicaID: replicaID})
	if err != nil {
		return nil, err
	}
	retry := opts.RenewInterval
	if retry <= 0 {
		retry = opts.LeaseDuration / 3
	}
	if retry <= 0 {
		retry = membership.DefaultLeaseDuration / 3
	}
	releaseAfter := opts.ReleaseAfter
	if releaseAfter <= 0 {
		releaseAfter = 30 * time.Second
	}
	s := &Runtime{plan: plan, member: member, source: source, ring: membership.NewRingSource(source), active: &activeReconciles{}, retry: retry, releaseAfter: releaseAfter}
	switch plan.Mode {
	case ModeServer:
		s.share = serverside.NewShare(s.ring, replicaID)
		s.barrier, err = serverside.NewBarrier(serverside.BarrierOptions{Member: replicaID, Ring: s.ring, Publisher: member, Leases: source})
		if err != nil {
			return nil, err
		}
	default:
		s.inFlight = sharder.NewInFlight()
	}
	return s, nil
}

// Member is the replica's membership of the ring: the fence of its writes
// (it holds a term while it holds its Lease) and its readiness check.
func (s *Runtime) Member() *membership.Member { return s.member }

// RingCheck is the readiness check of the ring the replica reads.
func (s *Runtime) RingCheck(req *http.Request) error { return s.source.Check(req) }

// CacheOptions narrows the cache of each sharded kind to the replica's
// share: by the shard label, and in server mode the primary kind by the
// shard selector of its ranges.
func (s *Runtime) CacheOptions(o *cache.Options) {
	s.plan.shardCacheOptions(*o)
	if s.share != nil {
		primary := s.plan.Primary
		// The cache asks for the primary kind's informer with object.New(gvk).
		o.NewInformer = s.share.NewInformer(func(obj runtime.Object) bool { return obj.GetObjectKind().GroupVersionKind() == primary })
	}
}

// SetUp adds the replica's membership to mgr, which releases the Lease last
// (lastToLetGo); in label mode the sharder (on the leader, fenced by leader,
// the leader election's lock) from a metadata cache of its own, in server
// mode the handoff barrier; and the count of the objects the replica caches.
func (s *Runtime) SetUp(mgr ctrl.Manager, res *description.Resolved, leader fencing.Fence) error {
	held := &lastToLetGo{member: s.member, active: s.active, bound: s.releaseAfter}
	runnables := []manager.LeaderElectionRunnable{held, s.source, s.ring}
	if s.barrier != nil {
		runnables = append(runnables, s.barrier)
	}
	for _, r := range runnables {
		if err := mgr.Add(r.(manager.Runnable)); err != nil {
			return err
		}
	}
	if s.plan.Mode == ModeLabels {
		view := res.Views[s.plan.Primary]
		sc, err := sharder.NewCache(mgr, cache.Options{
			DefaultNamespaces:    namespaceConfigs(view.Namespaces),
			DefaultLabelSelector: view.Labels,
			DefaultTransform:     cache.TransformStripManagedFields(),
		})
		if err != nil {
			return err
		}
		if err := sharder.Add(mgr, sharder.Options{Ring: s.plan.Shard.Ring, GVK: s.plan.Primary, Source: s.ring, Cache: sc, Fence: leader}); err != nil {
			return err
		}
	}
	kinds := make([]schema.GroupVersionKind, 0, len(s.plan.Sharded))
	for gvk := range s.plan.Sharded {
		if err := countCached(mgr, s.plan.Shard.Ring, gvk); err != nil {
			return err
		}
		kinds = append(kinds, gvk)
	}
	rejoinOpts := rejoin.Options{Member: s.member, Kinds: kinds, Cache: mgr.GetCache(), Live: mgr.GetAPIReader()}
	if s.barrier != nil {
		rejoinOpts.Ring, rejoinOpts.Barrier = s.source, s.barrier
	}
	rejoiner, err := rejoin.New(rejoinOpts)
	if err != nil {
		return err
	}
	return mgr.Add(rejoiner)
}

func namespaceConfigs(namespaces []string) map[string]cache.Config {
	if len(namespaces) == 0 {
		return nil
	}
	out := make(map[string]cache.Config, len(namespaces))
	for _, ns := range namespaces {
		out[ns] = cache.Config{}
	}
	return out
}

// ChildLabels are the labels the host sets on each child of owner: its
// shard label. In label mode that is the owner's own label; in server mode,
// where the owner carries none, this replica, which reconciles only what it
// owns.
func (s *Runtime) ChildLabels(owner client.Object) map[string]string {
	if s.plan.Mode == ModeServer {
		return map[string]string{sharding.ShardLabel(s.plan.Shard.Ring): s.plan.Shard.Member}
	}
	return sharder.ChildLabels(s.plan.Shard.Ring, owner)
}

// Wrap wraps a controller's reconciler of the primary kind: it reconciles
// only while the replica holds its Lease, and only the objects it owns: in
// label mode those labelled with the replica (handing off those the sharder
// asks it to drain), tracked in one InFlight shared by every controller of
// the replica; in server mode those the handoff barrier lets begin.
func (s *Runtime) Wrap(mgr ctrl.Manager) func(c description.Controller, r reconcile.Reconciler) (reconcile.Reconciler, error) {
	return func(c description.Controller, r reconcile.Reconciler) (reconcile.Reconciler, error) {
		gvk := c.GVK
		newObject := func() client.Object { return object.New(gvk) }
		var (
			inner reconcile.Reconciler
			err   error
		)
		if s.barrier != nil {
			inner, err = serverside.NewReconciler(r, serverside.ReconcilerOptions{
				Reader: mgr.GetCache(), NewObject: newObject, Barrier: s.barrier, NotOwned: s.retry, Live: mgr.GetAPIReader(),
			})
		} else {
			inner, err = s.plan.Shard.Reconciler(r, sharder.ReconcilerOptions{
				Reader: mgr.GetClient(), Client: mgr.GetClient(), NewObject: newObject, InFlight: s.inFlight,
			})
		}
		if err != nil {
			return nil, err
		}
		return &holdingReconciler{inner: inner, member: s.member, active: s.active, retry: s.retry, ring: s.plan.Shard.Ring, replica: s.plan.Shard.Member}, nil
	}
}

// CheckServed fails, saying what to do, when the API server does not serve
// sharded list and watch of the primary kind (server mode).
func (s *Runtime) CheckServed(ctx context.Context, cfg *rest.Config, httpClient *http.Client, mapper meta.RESTMapper, res *description.Resolved) error {
	if s.plan.Mode != ModeServer {
		return nil
	}
	gvk := s.plan.Primary
	mapping, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return fmt.Errorf("--sharding=server: mapping %s: %w", description.GVKString(gvk), err)
	}
	mc, err := metadata.NewForConfigAndClient(cfg, httpClient)
	if err != nil {
		return fmt.Errorf("--sharding=server: %w", err)
	}
	resource := mc.Resource(mapping.Resource)
	var lister metadata.ResourceInterface = resource
	if ns := res.Views[gvk].Namespaces; len(ns) > 0 && mapping.Scope.Name() == meta.RESTScopeNameNamespace {
		lister = resource.Namespace(ns[0])
	}
	err = serverside.CheckServed(ctx, func(ctx context.Context, o metav1.ListOptions) error {
		_, err := lister.List(ctx, o)
		return err
	})
	switch {
	case err == nil:
		return nil
	case errors.Is(err, serverside.ErrNotServed):
		return fmt.Errorf("--sharding=server needs the API server's ShardedListAndWatch feature gate, which is off (a list of %s ignored its shard selector); use --sharding=labels", description.GVKString(gvk))
	default:
		return fmt.Errorf("--sharding=server: checking that the API server serves sharded lists of %s: %w", description.GVKString(gvk), err)
	}
}

// holdingReconciler reconciles only while the replica holds its Lease. A
// replica that cannot renew its Lease stops holding it at the renew
// deadline, before the others drop it from the ring at the lease duration;
// until it holds it again, each object it is asked to reconcile is looked at
// again a renew interval later, and nothing is written. If its Lease expires
// meanwhile, the sharder gives its objects to the other replicas, its cache
// drops them, and those requeues find nothing.
type holdingReconciler struct {
	inner         reconcile.Reconciler
	member        interface{ Holding() bool }
	active        *activeReconciles
	retry         time.Duration
	ring, replica string
}

func (h *holdingReconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	if !h.member.Holding() {
		log.FromContext(ctx).V(1).Info("Not reconciling while the replica does not hold its Lease in the ring", "ring", h.ring, "replica", h.replica, "retryAfter", h.retry.String())
		return reconcile.Result{RequeueAfter: h.retry}, nil
	}
	if h.active != nil {
		if !h.active.begin() {
			// Stopping: the replica's objects go to the others once its
			// Lease is released, and they reconcile them.
			return reconcile.Result{}, nil
		}
		defer h.active.end()
	}
	return h.inner.Reconcile(ctx, req)
}

// activeReconciles counts the reconciles running in a replica; once
// stopping, it starts no more.
type activeReconciles struct {
	mu       sync.Mutex
	running  int
	stopping bool
	idle     chan struct{} // closed when running falls to 0 while stopping
}

func (a *activeReconciles) begin() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.stopping {
		return false
	}
	a.running++
	return true
}

func (a *activeReconciles) end() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.running--
	if a.running == 0 && a.idle != nil {
		close(a.idle)
		a.idle = nil
	}
}

// stop starts no more reconciles and waits until the running ones have
// ended, or ctx ends; it reports whether they ended.
func (a *activeReconciles) stop(ctx context.Context) bool {
	a.mu.Lock()
	a.stopping = true
	if a.running == 0 {
		a.mu.Unlock()
		return true
	}
	if a.idle == nil {
		a.idle = make(chan struct{})
	}
	idle := a.idle
	a.mu.Unlock()
	select {
	case <-idle:
		return true
	case <-ctx.Done():
		return false
	}
}

// lastToLetGo runs the replica's Member so that, when the manager stops, it
// releases the Lease only after the replica's reconciles have ended (or bound
// has passed): the others take the replica's objects as soon as its Lease is
// gone, and must not reconcile one that is still in flight here. The
// manager stops the controllers and the Member at once.
type lastToLetGo struct {
	member interface {
		Start(context.Context) error
	}
	active *activeReconciles
	bound  time.Duration
}

// NeedLeaderElection is false: every replica holds its Lease.
func (l *lastToLetGo) NeedLeaderElection() bool { return false }

func (l *lastToLetGo) Start(ctx context.Context) error {
	memberCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- l.member.Start(memberCtx) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	wait, cancelWait := context.WithTimeout(context.Background(), l.bound)
	if !l.active.stop(wait) {
		log.FromContext(ctx).Info("Releasing the shard Lease with reconciles still running: the others take its objects now", "after", l.bound.String())
	}
	cancelWait()
	cancel()
	return <-done
}

// ownedObjects counts, per ring and kind, the objects the replica's cache
// holds of each sharded kind.
var ownedObjects = prometheus.NewGaugeVec(prometheus.GaugeOpts{
	Name: "polyop_shard_owned_objects",
	Help: "The objects of each sharded kind (the reconciled kind and its children) this replica's cache holds: its share.",
}, []string{"ring", "kind"})

func init() { metrics.Registry.MustRegister(ownedObjects) }

// countCached keeps polyop_shard_owned_objects of gvk: the informer's adds
// and deletes, which add up to what its store holds.
func countCached(mgr ctrl.Manager, ringName string, gvk schema.GroupVersionKind) error {
	inf, err := mgr.GetCache().GetInformer(context.Background(), object.New(gvk))
	if err != nil {
		return fmt.Errorf("sharding: the informer of %s: %w", description.GVKString(gvk), err)
	}
	g := ownedObjects.WithLabelValues(ringName, description.GVKString(gvk))
	g.Set(0)
	_, err = inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { g.Inc() },
		DeleteFunc: func(any) { g.Dec() },
	})
	return err
}
