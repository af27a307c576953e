package host

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"reflect"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/polyop/polyop/internal/controller"
	"github.com/polyop/polyop/internal/object"
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

	sc, err := sidecar.New(sidecar.Options{
		Address:          opts.SidecarAddress,
		ClusterAddress:   clusterAddress(opts),
		MaxMessageSize:   opts.MaxMessageSize,
		MaxObjectSize:    opts.MaxObjectSize,
		DescribeTimeout:  opts.DescribeTimeout,
		ReconcileTimeout: opts.ReconcileTimeout,
		// The connection is back at most about this long after the sidecar.
		MaxReconnectDelay: opts.SidecarDownMaxBackoff,
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
	log.Info("sidecar described itself", "sidecar", desc.Name, "sdk", desc.SDKName, "sdkVersion", desc.SDKVersion, "controllers", len(desc.Controllers))

	httpClient, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return fmt.Errorf("building the API server client: %w", err)
	}
	mapper, err := apiutil.NewDynamicRESTMapper(cfg, httpClient)
	if err != nil {
		return fmt.Errorf("building the REST mapper: %w", err)
	}
	namespaced, err := resolveKinds(mapper, desc)
	if err != nil {
		return err
	}
	if err := resolveRelatedKinds(mapper, desc, namespaced); err != nil {
		return err
	}
	if err := narrow(desc, namespaced, opts); err != nil {
		return err
	}
	cacheOpts, err := cacheOptions(desc, namespaced, opts)
	if err != nil {
		return err
	}
	addRelatedCacheViews(&cacheOpts, desc, namespaced, opts.KeepManagedFields)

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
	mgr, err := ctrl.NewManager(mgrCfg, ctrl.Options{
		Scheme:                        scheme,
		MapperProvider:                func(*rest.Config, *http.Client) (meta.RESTMapper, error) { return mapper, nil },
		Cache:                         cacheOpts,
		Metrics:                       metricsOpts,
		HealthProbeBindAddress:        opts.HealthProbeBindAddress,
		PprofBindAddress:              opts.PprofBindAddress,
		LeaderElection:                opts.LeaderElection,
		LeaderElectionID:              leaderElectionID,
		LeaderElectionNamespace:       opts.LeaderElectionNamespace,
		LeaderElectionReleaseOnCancel: true,
		LeaseDuration:                 &opts.LeaseDuration,
		RenewDeadline:                 &opts.RenewDeadline,
		RetryPeriod:                   &opts.RetryPeriod,
	})
	if err != nil {
		return fmt.Errorf("creating the manager: %w", err)
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("sidecar", sc.Check); err != nil {
		return err
	}
	if err := controller.Setup(mgr, sc, desc, controller.Options{
		SidecarDownMaxBackoff: opts.SidecarDownMaxBackoff,
		KeepManagedFields:     opts.KeepManagedFields,
		MaxObjectSize:         opts.MaxObjectSize,
	}); err != nil {
		return err
	}
	informers, err := startInformers(mgr, watchedKinds(desc))
	if err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("informers", informers.Check); err != nil {
		return err
	}
	if err := addClusterService(mgr, cfg, httpClient, desc, cacheOpts, clusterTLS, opts); err != nil {
		return err
	}
	if err := setupWebhooks(ctx, cfg, mgr, sc, desc, mapper, opts.Webhook); err != nil {
		return err
	}
	log.Info("starting manager", "sidecar", desc.Name, "address", sc.Address())
	return mgr.Start(ctx)
}

// resolveKinds checks that the API server serves every declared kind, and
// reports which are namespaced.
func resolveKinds(mapper meta.RESTMapper, desc *sidecar.Description) (map[schema.GroupVersionKind]bool, error) {
	namespaced := map[schema.GroupVersionKind]bool{}
	var errs []error
	for _, c := range desc.Controllers {
		mapping, err := mapper.RESTMapping(c.GVK.GroupKind(), c.GVK.Version)
		if err != nil {
			errs = append(errs, fmt.Errorf("controller %q reconciles %s, which the API server does not serve: %w", c.Name, gvkString(c.GVK), err))
			continue
		}
		namespaced[c.GVK] = mapping.Scope.Name() == meta.RESTScopeNameNamespace
		if !namespaced[c.GVK] && len(c.Namespaces) > 0 {
			errs = append(errs, fmt.Errorf("controller %q declares namespaces for %s, which is cluster-scoped", c.Name, gvkString(c.GVK)))
		}
	}
	return namespaced, errors.Join(errs...)
}

// narrow applies the host's --namespace and --label-selector flags. Namespaces
// narrow namespaced kinds only.
func narrow(desc *sidecar.Description, namespaced map[schema.GroupVersionKind]bool, opts Options) error {
	selector := labels.Everything()
	if opts.LabelSelector != "" {
		s, err := labels.Parse(opts.LabelSelector)
		if err != nil {
			return fmt.Errorf("--label-selector: %w", err)
		}
		selector = s
	}
	var errs []error
	for i := range desc.Controllers {
		one := &sidecar.Description{Name: desc.Name, Controllers: []sidecar.Controller{desc.Controllers[i]}}
		namespaces := opts.Namespaces
		if !namespaced[desc.Controllers[i].GVK] {
			namespaces = nil
		}
		if err := one.Narrow(namespaces, selector); err != nil {
			errs = append(errs, err)
		}
		desc.Controllers[i] = one.Controllers[0]
	}
	return errors.Join(errs...)
}

// cacheOptions gives each reconciled kind its own cache view: its namespaces
// and its label selector. Two controllers of one kind must agree on that view.
func cacheOptions(desc *sidecar.Description, namespaced map[schema.GroupVersionKind]bool, opts Options) (cache.Options, error) {
	o := cache.Options{ByObject: map[client.Object]cache.ByObject{}}
	seen := map[schema.GroupVersionKind]sidecar.Controller{}
	for _, c := range desc.Controllers {
		if prev, ok := seen[c.GVK]; ok {
			if !reflect.DeepEqual(prev.Namespaces, c.Namespaces) || prev.LabelSelector.String() != c.LabelSelector.String() {
				return o, fmt.Errorf("controllers %q and %q both reconcile %s but watch different namespaces or labels; the host caches one view of each kind",
					prev.Name, c.Name, gvkString(c.GVK))
			}
			continue
		}
		seen[c.GVK] = c
		by := cache.ByObject{Transform: object.Transform(c.GVK, opts.KeepManagedFields)}
		if !c.LabelSelector.Empty() {
			by.Label = c.LabelSelector
		}
		if namespaced[c.GVK] && len(c.Namespaces) > 0 {
			by.Namespaces = map[string]cache.Config{}
			for _, ns := range c.Namespaces {
				by.Namespaces[ns] = cache.Config{}
			}
		}
		o.ByObject[object.New(c.GVK)] = by
	}
	return o, nil
}

func gvkString(gvk schema.GroupVersionKind) string {
	return gvk.Kind + "." + gvk.GroupVersion().String()
}
