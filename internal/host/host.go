package host

import (
	"context"
	"fmt"
	"net/http"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	eventsv1client "k8s.io/client-go/kubernetes/typed/events/v1"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	clusterservice "github.com/polyop/polyop/internal/cluster"
	"github.com/polyop/polyop/internal/controller"
	"github.com/polyop/polyop/internal/description"
	"github.com/polyop/polyop/internal/fencing"
	"github.com/polyop/polyop/internal/object"
	"github.com/polyop/polyop/internal/sharding/replica"
	"github.com/polyop/polyop/internal/sidecar"
	"github.com/polyop/polyop/internal/version"
)

// Run runs the host until ctx is done: it waits for the sidecar, asks it to
// describe itself, resolves the declared kinds, and runs the manager. It
// returns an error, naming the problem, when the sidecar does not become ready,
// speaks another protocol version, declares an invalid description or a kind
// the API server does not serve.
func Run(ctx context.Context, cfg *rest.Config, opts Options) error {
	log := ctrl.Log.WithName("host")
	p, err := newPlan(opts)
	if err != nil {
		return err
	}
	tp, shutdownTracing, err := setUpTracing(ctx, log)
	if err != nil {
		return err
	}
	defer shutdownTracing()

	sc, err := sidecar.New(p.sidecarOptions(tp))
	if err != nil {
		return err
	}
	defer sc.Close()
	if err := sc.WaitReady(ctx, opts.SidecarWaitTimeout, log); err != nil {
		return err
	}
	desc, err := sc.Describe(ctx, version.Version)
	if err != nil {
		return err
	}
	log.Info("sidecar described itself", "sidecar", desc.Name, "sdk", desc.SDKName, "sdkVersion", desc.SDKVersion, "controllers", len(desc.Controllers), "streams", sc.Streams())

	httpClient, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return fmt.Errorf("building the API server client: %w", err)
	}
	mapper, err := apiutil.NewDynamicRESTMapper(cfg, httpClient)
	if err != nil {
		return fmt.Errorf("building the REST mapper: %w", err)
	}
	res, err := p.resolve(mapper, desc)
	if err != nil {
		return err
	}
	var shards *replica.Runtime
	if p.shards != nil {
		if shards, err = replica.New(cfg, httpClient, p.shards, p.shardOptions()); err != nil {
			return err
		}
		if err := shards.CheckServed(ctx, cfg, httpClient, mapper, res); err != nil {
			return err
		}
	}
	mgrCfg := jsonConfig(cfg)
	lock, err := leaderLock(mgrCfg, p)
	if err != nil {
		return err
	}
	mgr, err := newManager(mgrCfg, mapper, p, lock, shards)
	if err != nil {
		return err
	}
	probes := newProbes()
	probes.addHealthz("healthz", healthz.Ping)
	probes.addReadyz("sidecar", sc.Check, true)
	if err := metrics.Registry.Register(sc.UpCollector()); err != nil {
		// Another host in this process (a test's) serves it already.
		log.V(1).Info("not registering polyop_sidecar_up", "reason", err.Error())
	} else {
		defer metrics.Registry.Unregister(sc.UpCollector())
	}
	// The Cluster service's Watch streams catch up with what the
	// controllers saw before each call (see cluster.CacheProgress).
	var progress *clusterservice.CacheProgress
	if p.clusterAddress != "" {
		progress = clusterservice.NewCacheProgress()
		progress.Log = ctrl.Log.WithName("cluster")
	}
	// The elected replica writes only while it leads; a sharded one, while
	// it holds its shard Lease.
	fence := fenceOf(lock, shards)
	ctrlOpts, err := controllerOptions(mgr, mgrCfg, httpClient, p, progress, fence, shards)
	if err != nil {
		return err
	}
	if shards != nil {
		var leader fencing.Fence
		if lock != nil {
			leader = lock
		}
		if err := shards.SetUp(mgr, res, leader); err != nil {
			return err
		}
		probes.addReadyz("shard-lease", shards.Member().Check, true)
		probes.addReadyz("shard-ring", shards.RingCheck, true)
		log.Info("sharding", "mode", p.shards.Mode, "ring", p.shards.Shard.Ring, "replica", p.shards.Shard.Member, "leaseNamespace", p.shards.Namespace,
			"kind", description.GVKString(p.shards.Primary), "shardedKinds", len(p.shards.Sharded))
	}
	if err := controller.Setup(mgr, sc, res, ctrlOpts); err != nil {
		return err
	}
	if err := addIndexes(mgr, res); err != nil {
		return err
	}
	informers, err := startInformers(mgr, append(res.WatchedKinds(), declaredKinds(res)...))
	if err != nil {
		return err
	}
	probes.addReadyz("informers", informers.Check, true)
	if err := addClusterService(mgr, cfg, httpClient, p, tp, progress, fence); err != nil {
		return err
	}
	if err := setupWebhooks(ctx, cfg, mgr, probes, sc, res, p.webhook); err != nil {
		return err
	}
	if err := probes.serve(mgr, opts.HealthProbeBindAddress); err != nil {
		return err
	}
	log.Info("starting manager", "sidecar", desc.Name, "address", sc.Address())
	return mgr.Start(ctx)
}

// newManager makes the manager: its cache holds each kind the description
// declares in its view (the replica's share of the sharded kinds), as
// object.Object; the mapper answers for those kinds without asking
// discovery again; lock, when set, is the leader election's.
func newManager(cfg *rest.Config, mapper meta.RESTMapper, p *plan, lock *fencing.LeaderLock, shards *replica.Runtime) (ctrl.Manager, error) {
	cacheOpts := cacheOptions(p.res, p.opts.KeepManagedFields)
	if shards != nil {
		shards.CacheOptions(&cacheOpts)
	}
	cached := cachedKindList(cacheOpts)
	mapper = withFixedMappings(mapper, cached)
	// The scheme maps every cached kind to object.Object, which the cache
	// holds instead of map-based unstructured objects; every other kind the
	// host reads or writes is unstructured, and needs no Go type.
	scheme := runtime.NewScheme()
	object.AddToScheme(scheme, cached...)
	mgrOpts := p.managerOptions()
	mgrOpts.Scheme = scheme
	mgrOpts.MapperProvider = func(*rest.Config, *http.Client) (meta.RESTMapper, error) { return mapper, nil }
	mgrOpts.Cache = cacheOpts
	if lock != nil {
		mgrOpts.LeaderElectionResourceLockInterface = lock
	}
	mgr, err := ctrl.NewManager(cfg, mgrOpts)
	if err != nil {
		return nil, fmt.Errorf("creating the manager: %w", err)
	}
	if lock != nil {
		lock.SetRecorder(mgr.GetEventRecorderFor(lock.Identity())) //nolint:staticcheck // client-go's leader election records through the old events API.
	}
	return mgr, nil
}

// fenceOf is what the controllers' writes are fenced by: a sharded
// replica's membership (every replica reconciles its share while it holds
// its shard Lease), else the leader election's lock, else nothing.
func fenceOf(lock *fencing.LeaderLock, shards *replica.Runtime) fencing.Fence {
	switch {
	case shards != nil:
		return shards.Member()
	case lock != nil:
		return lock
	default:
		return nil
	}
}

// controllerOptions configure the controllers: a fenced replica records
// their Events through a sink that sends them only while it holds its term
// (fencedEvents), and a sharded one reconciles its share on every replica.
func controllerOptions(mgr ctrl.Manager, cfg *rest.Config, httpClient *http.Client, p *plan, progress *clusterservice.CacheProgress,
	fence fencing.Fence, shards *replica.Runtime) (controller.Options, error) {
	o := controller.Options{
		SidecarDownMaxBackoff: p.opts.SidecarDownMaxBackoff,
		KeepManagedFields:     p.opts.KeepManagedFields,
		MaxObjectSize:         p.opts.MaxObjectSize,
		Fence:                 fence,

		MaxConcurrentChildWrites: p.opts.MaxConcurrentChildWrites,
	}
	if progress != nil {
		o.CacheProgress = progress
	}
	if shards != nil {
		o.ChildLabels = shards.ChildLabels
		o.WrapReconciler = shards.Wrap(mgr)
		o.EveryReplica = true
		o.UpdateLabels = p.shards.UpdateLabels()
	}
	if fence != nil {
		cs, err := eventsv1client.NewForConfigAndClient(cfg, httpClient)
		if err != nil {
			return o, fmt.Errorf("building the client of the controllers' Events: %w", err)
		}
		events := newFencedEvents(cs, mgr.GetScheme(), fence)
		if err := mgr.Add(events); err != nil {
			return o, err
		}
		o.EventRecorder = events.recorder
	}
	return o, nil
}

// cacheOptions gives every kind the cache holds its view, and the transform
// that turns what the API server sends into the object the cache keeps.
func cacheOptions(res *description.Resolved, keepManagedFields bool) cache.Options {
	o := cache.Options{ByObject: map[client.Object]cache.ByObject{}}
	for gvk, view := range res.Views {
		by := cache.ByObject{Transform: object.Transform(gvk, keepManagedFields), Label: view.Labels, Field: view.Fields}
		if len(view.Namespaces) > 0 {
			by.Namespaces = map[string]cache.Config{}
			for _, ns := range view.Namespaces {
				by.Namespaces[ns] = cache.Config{}
			}
		}
		o.ByObject[object.New(gvk)] = by
	}
	return o
}
