package host

import (
	"context"
	"fmt"
	"net/http"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	clusterservice "github.com/polyop/polyop/internal/cluster"
	"github.com/polyop/polyop/internal/controller"
	"github.com/polyop/polyop/internal/description"
	"github.com/polyop/polyop/internal/object"
	"github.com/polyop/polyop/internal/sharding"
	"github.com/polyop/polyop/internal/sidecar"
)

// Run runs the host until ctx is done: it waits for the sidecar, asks it to
// describe itself, resolves the declared kinds, and runs the manager. It
// returns an error, naming the problem, when the sidecar does not become ready,
// speaks another protocol version, declares an invalid description or a kind
// the API server does not serve.
func Run(ctx context.Context, cfg *rest.Config, opts Options) error {
	log := ctrl.Log.WithName("host")
	clusterTLS, err := clusterServiceTLS(opts)
	if err != nil {
		return err
	}
	tp, shutdownTracing, err := setUpTracing(ctx, log)
	if err != nil {
		return err
	}
	defer shutdownTracing()

	sc, err := sidecar.New(sidecar.Options{
		Address:          opts.SidecarAddress,
		ClusterAddress:   clusterAddress(opts),
		MaxMessageSize:   opts.MaxMessageSize,
		MaxObjectSize:    opts.MaxObjectSize,
		DescribeTimeout:  opts.DescribeTimeout,
		ReconcileTimeout: opts.ReconcileTimeout,
		// The connection is back at most about this long after the sidecar.
		MaxReconnectDelay: opts.SidecarDownMaxBackoff,
		TracerProvider:    tp,
		DisableStreams:    !opts.SidecarStreams,
	})
	if err != nil {
		return err
	}
	defer sc.Close()

	if err := sc.WaitReady(ctx, opts.SidecarWaitTimeout, log); err != nil {
		return err
	}
	desc, err := sc.Describe(ctx, Version)
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
	res, err := resolve(mapper, desc, opts)
	if err != nil {
		return err
	}
	plan, err := planSharding(res, opts)
	if err != nil {
		return err
	}
	cacheOpts := cacheOptions(res, opts.KeepManagedFields)
	var shards *shardRuntime
	if plan != nil {
		if shards, err = newShardRuntime(cfg, httpClient, plan, opts); err != nil {
			return err
		}
		if err := shards.checkServed(ctx, cfg, httpClient, mapper, res); err != nil {
			return err
		}
		shards.cacheOptions(&cacheOpts)
	}
	mapper = withFixedMappings(mapper, cachedKindList(cacheOpts))

	// The scheme maps every cached kind to object.Object, which the cache
	// holds instead of map-based unstructured objects; every other kind the
	// host reads or writes is unstructured, and needs no Go type.
	scheme := runtime.NewScheme()
	object.AddToScheme(scheme, cachedKindList(cacheOpts)...)
	// Object decodes JSON; the client would otherwise ask for built-in kinds
	// as protobuf.
	mgrCfg := rest.CopyConfig(cfg)
	mgrCfg.ContentType = runtime.ContentTypeJSON
	metricsOpts := metricsserver.Options{
		BindAddress:   opts.MetricsBindAddress,
		SecureServing: opts.SecureMetrics,
	}
	if opts.SecureMetrics {
		metricsOpts.FilterProvider = filters.WithAuthenticationAndAuthorization
	}
	leaderElectionID := opts.LeaderElectionID
	if leaderElectionID == "" {
		leaderElectionID = desc.Name + ".polyop.dev"
	}
	lock, err := leaderLock(mgrCfg, leaderElectionID, opts)
	if err != nil {
		return err
	}
	mgrOpts := ctrl.Options{
		Scheme:         scheme,
		MapperProvider: func(*rest.Config, *http.Client) (meta.RESTMapper, error) { return mapper, nil },
		Cache:          cacheOpts,
		Metrics:        metricsOpts,
		// The host serves its own probes (see probes), on this address.
		HealthProbeBindAddress:        "0",
		PprofBindAddress:              opts.PprofBindAddress,
		LeaderElection:                opts.LeaderElection,
		LeaderElectionID:              leaderElectionID,
		LeaderElectionNamespace:       opts.LeaderElectionNamespace,
		LeaderElectionReleaseOnCancel: true,
		LeaseDuration:                 &opts.LeaseDuration,
		RenewDeadline:                 &opts.RenewDeadline,
		RetryPeriod:                   &opts.RetryPeriod,
	}
	if lock != nil {
		mgrOpts.LeaderElectionResourceLockInterface = lock
	}
	mgr, err := ctrl.NewManager(mgrCfg, mgrOpts)
	if err != nil {
		return fmt.Errorf("creating the manager: %w", err)
	}
	if lock != nil {
		lock.SetRecorder(mgr.GetEventRecorderFor(lock.Identity())) //nolint:staticcheck // client-go's leader election records through the old events API.
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
	var cacheProgress controller.CacheProgress
	if clusterAddress(opts) != "" {
		progress = clusterservice.NewCacheProgress()
		progress.Log = ctrl.Log.WithName("cluster")
		cacheProgress = progress
	}
	ctrlOpts := controller.Options{
		CacheProgress:         cacheProgress,
		SidecarDownMaxBackoff: opts.SidecarDownMaxBackoff,
		KeepManagedFields:     opts.KeepManagedFields,
		MaxObjectSize:         opts.MaxObjectSize,

		MaxConcurrentChildWrites: opts.MaxConcurrentChildWrites,
	}
	if lock != nil {
		// The elected replica writes only while it leads.
		ctrlOpts.Fence = lock
	}
	var sharded map[schema.GroupVersionKind]bool
	if shards != nil {
		if err := shards.setUp(mgr, res, opts); err != nil {
			return err
		}
		probes.addReadyz("shard-lease", shards.member.Check, true)
		probes.addReadyz("shard-ring", shards.source.Check, true)
		ctrlOpts.ChildLabels = shards.childLabels
		ctrlOpts.WrapReconciler = shards.wrap(mgr)
		ctrlOpts.EveryReplica = true
		// Every replica reconciles its share while it holds its shard Lease.
		ctrlOpts.Fence = shards.member
		if plan.mode == ShardingLabels {
			ctrlOpts.UpdateLabels = []string{sharding.ShardLabel(plan.shard.Ring), sharding.DrainLabel(plan.shard.Ring)}
		}
		sharded = plan.sharded
		log.Info("sharding", "mode", plan.mode, "ring", plan.shard.Ring, "replica", plan.shard.Member, "leaseNamespace", plan.namespace,
			"kind", description.GVKString(plan.primary), "shardedKinds", len(plan.sharded))
	}
	if ctrlOpts.Fence != nil {
		cs, err := kubernetes.NewForConfigAndClient(mgrCfg, httpClient)
		if err != nil {
			return fmt.Errorf("building the client of the controllers' Events: %w", err)
		}
		events := newFencedEvents(cs, mgr.GetScheme(), ctrlOpts.Fence)
		if err := mgr.Add(events); err != nil {
			return err
		}
		ctrlOpts.EventRecorder = events.recorder
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
	if err := addClusterService(mgr, cfg, httpClient, res, clusterTLS, tp, progress, sharded, ctrlOpts.Fence, opts); err != nil {
		return err
	}
	if err := setupWebhooks(ctx, cfg, mgr, probes, sc, res, opts.Webhook); err != nil {
		return err
	}
	if err := probes.serve(mgr, opts.HealthProbeBindAddress); err != nil {
		return err
	}
	log.Info("starting manager", "sidecar", desc.Name, "address", sc.Address())
	return mgr.Start(ctx)
}

// resolve resolves desc against the API server through mapper, narrowed by
// the host's --namespace and --label-selector flags (namespaces narrow
// namespaced kinds only), with the webhook Service the
// --webhook-service-name and --webhook-service-namespace flags name. With the
// webhook server off (--webhook-port 0), the kinds of webhooks and conversions
// are not looked up: nothing serves them.
func resolve(mapper meta.RESTMapper, desc *description.Description, opts Options) (*description.Resolved, error) {
	var selector labels.Selector
	if opts.LabelSelector != "" {
		s, err := labels.Parse(opts.LabelSelector)
		if err != nil {
			return nil, fmt.Errorf("--label-selector: %w", err)
		}
		selector = s
	}
	return description.Resolve(mapper, desc, description.ResolveOptions{
		Namespaces:       opts.Namespaces,
		LabelSelector:    selector,
		ServiceName:      opts.Webhook.ServiceName,
		ServiceNamespace: opts.Webhook.ServiceNamespace,
		WebhooksOff:      opts.Webhook.Port == 0,
	})
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
