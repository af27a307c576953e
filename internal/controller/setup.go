package controller

import (
	"context"
	"fmt"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	toolscache "k8s.io/client-go/tools/cache"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	"github.com/polyop/polyop/internal/description"
	"github.com/polyop/polyop/internal/fencing"
	"github.com/polyop/polyop/internal/object"
	polyopv1alpha1 "github.com/polyop/polyop/sdk/go/gen/polyop/v1alpha1"
)

// Options configure the controllers Setup builds.
type Options struct {
	// SidecarDownMaxBackoff caps the backoff of every key while the sidecar is
	// unreachable, so that pending work converges at most this long after the
	// sidecar comes back. Zero keeps controller-runtime's uncapped exponential
	// backoff. Defaults to zero.
	SidecarDownMaxBackoff time.Duration
	// KeepManagedFields keeps metadata.managedFields in the objects the
	// Reconcilers read back from their own writes, as the cache keeps them
	// with the host's --keep-managed-fields. Defaults to false: they are
	// dropped, as the cache drops them.
	KeepManagedFields bool
	// MaxObjectSize bounds the status and each desired child a sidecar
	// returns, in bytes. Defaults to sidecar.DefaultMaxObjectSize.
	MaxObjectSize int
	// CacheProgress, when set, is told of every event of the controllers'
	// reconciled, owned and watched kinds, and gives each call to the sidecar the cache
	// versions it must read at or after (ReconcileRequest.cache_versions),
	// so that a sidecar keeping its own copy of a kind through Watch reads
	// what triggered the call. Defaults to nil: calls carry none.
	CacheProgress CacheProgress
	// MaxConcurrentChildWrites bounds how many child applies (or deletes of
	// pruned children) of one reconcile are in flight at once. Defaults to
	// DefaultMaxConcurrentChildWrites (4).
	MaxConcurrentChildWrites int
	// ChildLabels returns the labels the host sets on every child of owner it
	// applies (see ReconcilerOptions.ChildLabels). Defaults to nil: none.
	ChildLabels func(owner client.Object) map[string]string
	// WrapReconciler, when set, wraps each controller's reconciler before it
	// is registered: with sharding on, in the replica's shard reconciler,
	// which reconciles only the replica's own objects and hands off those it
	// is asked to drain. Defaults to nil: the reconciler as it is.
	WrapReconciler func(c description.Controller, r reconcile.Reconciler) (reconcile.Reconciler, error)
	// EveryReplica runs the controllers on every replica rather than on the
	// elected leader only: with sharding on, each replica reconciles its
	// share. Defaults to false.
	EveryReplica bool
	// UpdateLabels are labels whose change lets an update of a reconciled
	// object through whatever the controller's update filters: with
	// sharding on, the shard and drain labels, so that a replica asked to
	// hand an object off sees it. Defaults to none.
	UpdateLabels []string
	// Fence tells the term of the lease the controllers reconcile under: the
	// leader election's, or the replica's shard Lease (see
	// ReconcilerOptions.Fence). Defaults to nil: no lease.
	Fence fencing.Fence
	// EventRecorder returns the recorder of the controller named name.
	// Defaults to the manager's (GetEventRecorder).
	EventRecorder func(name string) recorder.EventRecorder
}

// Setup builds one controller per controller in res and registers it with
// mgr, with the cache indexes its owned kinds and field-path watches need.
// Setup must run before mgr starts.
func Setup(mgr ctrl.Manager, sc Sidecar, res *description.Resolved, opts Options) error {
	state := &sidecarState{}
	if opts.EventRecorder == nil {
		opts.EventRecorder = mgr.GetEventRecorder
	}
	// Objects whose call found the sidecar unreachable wait for it to be
	// back, which its health service tells.
	if checked, ok := sc.(interface{ Serving(context.Context) error }); ok {
		if err := mgr.Add(watcher{state: state, log: mgr.GetLogger().WithName("sidecar"), serving: checked.Serving}); err != nil {
			return err
		}
	}
	indexes := indexSet{}
	clusterScoped := res.ClusterScoped()
	for _, c := range res.Controllers {
		t := target{gvk: c.GVK, namespaced: res.Kinds[c.GVK].Namespaced, namespaces: c.Namespaces}
		obj := object.New(c.GVK)
		var children []ChildKind
		for _, o := range c.Owns {
			children = append(children, ChildKind{
				GVK: o.GVK, Namespaced: res.Kinds[o.GVK].Namespaced, SendObserved: o.SendObserved, Adopt: o.Adopt, ReplaceOnImmutable: o.ReplaceOnImmutable,
			})
		}
		initMetrics(c, children)
		r := NewReconciler(c, mgr.GetClient(), sc, ReconcilerOptions{
			APIReader:             mgr.GetAPIReader(),
			Recorder:              opts.EventRecorder(c.Name),
			Children:              children,
			MaxObjectSize:         opts.MaxObjectSize,
			SidecarDownMaxBackoff: opts.SidecarDownMaxBackoff,
			KeepManagedFields:     opts.KeepManagedFields,
			CacheProgress:         opts.CacheProgress,
			state:                 state,

			MaxConcurrentChildWrites: opts.MaxConcurrentChildWrites,
			ChildLabels:              opts.ChildLabels,
			Fence:                    opts.Fence,
		})
		var rec reconcile.Reconciler = r
		if opts.WrapReconciler != nil {
			var err error
			if rec, err = opts.WrapReconciler(c, r); err != nil {
				return fmt.Errorf("controller %q for %s: %w", c.Name, description.GVKString(c.GVK), err)
			}
		}

		b := ctrl.NewControllerManagedBy(mgr).
			Named(c.Name).
			For(obj, builder.WithPredicates(append(seenPredicates(opts.CacheProgress, c.GVK), withLabelUpdates(updateFilterPredicates(filters(c)), opts.UpdateLabels)...)...)).
			WithOptions(controller.Options{
				MaxConcurrentReconciles: c.MaxConcurrentReconciles,
				RateLimiter:             r.limiter,
				LogConstructor:          logConstructor(mgr.GetLogger(), c.Name, c.GVK),
				NeedLeaderElection:      needLeaderElection(opts.EveryReplica),
			})

		for _, o := range c.Owns {
			child := object.New(o.GVK)
			if err := indexes.addOwnerIndex(mgr, child, clusterScoped); err != nil {
				return fmt.Errorf("controller %q owns %s: %w", c.Name, description.GVKString(o.GVK), err)
			}
			// Owns, written out: EnqueueRequestForOwner looks the owner's
			// kind up by Go type, which object.Object does not tell, and
			// its scope up in the REST mapper on every event; ownerHandler
			// knows both.
			b = b.Watches(child, seeing(opts.CacheProgress, o.GVK,
				ownerHandler{owner: c.GVK.GroupKind(), namespaced: t.namespaced}))
		}

		for _, w := range c.Watches {
			var mapper handler.MapFunc
			if len(w.FieldPath) > 0 {
				if err := indexes.add(mgr, object.New(c.GVK), FieldIndex(w.FieldPath), fieldValues(w.FieldPath)); err != nil {
					return fmt.Errorf("controller %q watches %s by %s: %w", c.Name, description.GVKString(w.GVK), FieldIndex(w.FieldPath), err)
				}
				mapper = fieldPathMapper(mgr.GetClient(), w, t)
			} else {
				mapper = nameMapper(w, t)
			}
			b = b.Watches(object.New(w.GVK), seeing(opts.CacheProgress, w.GVK, handler.EnqueueRequestsFromMapFunc(mapper)))
		}

		// The controller hands its queue to the reconciler, which requeues
		// into it the objects the sidecar client releases (see settle).
		b = b.WatchesRawSource(r.queue.source())
		if held, ok := sc.(interface {
			OnRelease(controller string, f func(namespace, name string))
		}); ok {
			held.OnRelease(c.Name, r.released)
		}

		if err := b.Complete(rec); err != nil {
			return fmt.Errorf("building controller %q for %s: %w", c.Name, c.GVK, err)
		}
	}
	return nil
}

// needLeaderElection is a controller's NeedLeaderElection: nil (the
// manager's default, the leader only) unless every replica runs it.
func needLeaderElection(everyReplica bool) *bool {
	if everyReplica {
		f := false
		return &f
	}
	return nil
}

// filters are the controller's update filters. A controller with a finalizer
// must see its object being deleted, so a filter list that would drop that
// update gets UPDATE_FILTER_DELETION_CHANGED added.
func filters(c description.Controller) []polyopv1alpha1.UpdateFilter {
	f := c.UpdateFilters
	deletion := polyopv1alpha1.UpdateFilter_UPDATE_FILTER_DELETION_CHANGED
	if c.Finalizer != "" && len(f) > 0 && !slices.Contains(f, deletion) {
		f = append(slices.Clone(f), deletion)
	}
	return f
}

// indexSet registers each cache index once: two controllers owning the same
// kind, or watching the same field of the same kind, share it.
type indexSet map[schema.GroupVersionKind]map[string]bool

func (s indexSet) add(mgr ctrl.Manager, obj *object.Object, name string, fn client.IndexerFunc) error {
	return s.once(obj, name, func() error {
		return mgr.GetFieldIndexer().IndexField(context.Background(), obj, name, fn)
	})
}

// addOwnerIndex registers OwnerIndex on obj's kind (see ownerIndexFunc).
func (s indexSet) addOwnerIndex(mgr ctrl.Manager, obj *object.Object, clusterScoped map[schema.GroupKind]bool) error {
	return s.once(obj, OwnerIndex, func() error {
		informer, err := mgr.GetCache().GetInformer(context.Background(), obj)
		if err != nil {
			return err
		}
		return informer.AddIndexers(toolscache.Indexers{ownerIndexName: ownerIndexFunc(clusterScoped)})
	})
}

// once runs register for index name on obj's kind unless it already ran.
func (s indexSet) once(obj *object.Object, name string, register func() error) error {
	gvk := obj.GroupVersionKind()
	if s[gvk][name] {
		return nil
	}
	if err := register(); err != nil {
		return fmt.Errorf("indexing %s by %s: %w", description.GVKString(gvk), name, err)
	}
	if s[gvk] == nil {
		s[gvk] = map[string]bool{}
	}
	s[gvk][name] = true
	return nil
}
