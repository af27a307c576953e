package sharder

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/polyop/polyop/internal/fencing"
	"github.com/polyop/polyop/internal/sharding"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/polyop/polyop/internal/sharding/ring"
)

// DefaultMaxConcurrentLabels is how many objects the sharder labels at once
// unless told otherwise: label patches are small and the API server, not the
// sharder, bounds their rate.
const DefaultMaxConcurrentLabels = 4

// conflictRetry is how soon the sharder looks again at an object whose patch
// met a newer version than its cache held: the cache catches up within
// moments, and an update that changed no label (a status write) brings no
// event that would look again.
const conflictRetry = 200 * time.Millisecond

// Options configure the sharder of one ring.
type Options struct {
	// Ring is the ring's name: the sidecar's name. Required.
	Ring string
	// GVK is the primary kind whose objects the sharder labels. Required.
	GVK schema.GroupVersionKind
	// Source publishes the ring of live members. Required.
	Source RingSource
	// Cache is where the sharder reads and watches the kind's metadata. It
	// must see every object of the kind, whatever its labels: a replica's
	// manager cache selects the replica's share of the kind (for every
	// informer of that GVK, metadata-only ones included), so give the
	// sharder a cache of its own there (NewCache). Defaults to mgr's cache.
	Cache cache.Cache
	// MaxConcurrentLabels is how many objects the sharder patches at once.
	// Defaults to DefaultMaxConcurrentLabels.
	MaxConcurrentLabels int
	// Fence is the leader election's term (fencing.LeaderLock): the sharder
	// labels an object only while the term it decided under is held, so
	// that a leader paused past its lease labels nothing from the ring it
	// saw before the pause. Defaults to nil: no check.
	Fence fencing.Fence
}

// Add adds the sharder of opts.Ring to mgr. It runs only on the elected
// leader (NeedLeaderElection, as every controller), reads opts.GVK's objects
// as metadata (PartialObjectMetadata) from opts.Cache, in the namespaces that
// cache covers, and labels them through mgr's client. Its controller is
// named "sharder-<ring>".
func Add(mgr manager.Manager, opts Options) error {
	if err := validateNames(opts.Ring, ""); err != nil {
		return err
	}
	if opts.GVK.Kind == "" || opts.GVK.Version == "" {
		return fmt.Errorf("sharding: the sharder of ring %q has no kind to label", opts.Ring)
	}
	if opts.Source == nil {
		return fmt.Errorf("sharding: the sharder of ring %q has no ring source", opts.Ring)
	}
	if opts.MaxConcurrentLabels < 1 {
		opts.MaxConcurrentLabels = DefaultMaxConcurrentLabels
	}
	if opts.Cache == nil {
		opts.Cache = mgr.GetCache()
	}
	s := &sharder{
		fence:    opts.Fence,
		ringName: opts.Ring,
		gvk:      opts.GVK,
		source:   opts.Source,
		client:   mgr.GetClient(),
		reader:   opts.Cache,
		shard:    sharding.ShardLabel(opts.Ring),
		drain:    sharding.DrainLabel(opts.Ring),
	}
	return builder.ControllerManagedBy(mgr).
		Named("sharder-" + opts.Ring).
		WatchesRawSource(source.Kind(opts.Cache, s.newObject(), &handler.TypedEnqueueRequestForObject[*metav1.PartialObjectMetadata]{},
			predicate.Or[*metav1.PartialObjectMetadata](
				predicate.TypedLabelChangedPredicate[*metav1.PartialObjectMetadata]{},
				// A deletion that began on an object with a dead member's
				// label still needs a live owner to finalize it.
				deletionStarted{},
			))).
		WatchesRawSource(source.Func(s.enqueueAllOnRingChange)).
		WithOptions(controller.Options{MaxConcurrentReconciles: opts.MaxConcurrentLabels}).
		Complete(s)
}

// sharder labels each object of one kind with the member that owns it.
type sharder struct {
	fence        fencing.Fence
	ringName     string
	gvk          schema.GroupVersionKind
	source       RingSource
	client       client.Client
	reader       client.Reader
	shard, drain string
}

func (s *sharder) newObject() *metav1.PartialObjectMetadata {
	o := &metav1.PartialObjectMetadata{}
	o.SetGroupVersionKind(s.gvk)
	return o
}

func (s *sharder) newList() *metav1.PartialObjectMetadataList {
	l := &metav1.PartialObjectMetadataList{}
	l.SetGroupVersionKind(s.gvk.GroupVersion().WithKind(s.gvk.Kind + "List"))
	return l
}

// Reconcile brings one object's shard label to the ring's owner of its UID:
// it labels an unlabelled object, asks a live former owner to drain it, moves
// it away from a dead one, and withdraws a drain the ring no longer wants.
func (s *sharder) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	var begun fencing.Term
	if s.fence != nil {
		if begun = s.fence.Term(); !begun.Valid() {
			log.FromContext(ctx).V(1).Info("Not labelling: the replica does not hold the leader election's lease", "ring", s.ringName)
			return reconcile.Result{RequeueAfter: conflictRetry}, nil
		}
	}
	obj := s.newObject()
	if err := s.reader.Get(ctx, req.NamespacedName, obj); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	r := s.source.Current()
	owner := r.OwnerOf(obj.GetUID())
	if owner == "" {
		// No live member: whatever is labelled stays so until one comes.
		return reconcile.Result{}, nil
	}
	current := obj.GetLabels()[s.shard]
	_, draining := obj.GetLabels()[s.drain]
	var (
		labels map[string]any
		what   string
		count  func()
	)
	switch {
	case current == owner && !draining:
		return reconcile.Result{}, nil
	case current == owner:
		labels, what = map[string]any{s.drain: nil}, "withdrawing the drain of"
	case current == "":
		labels, what = map[string]any{s.shard: owner, s.drain: nil}, "assigning"
		count = func() { assignmentsTotal.WithLabelValues(s.ringName).Inc() }
	case !isMember(r, current):
		labels, what = map[string]any{s.shard: owner, s.drain: nil}, "moving from a dead member"
		count = func() { deadMovesTotal.WithLabelValues(s.ringName).Inc() }
	case draining || obj.GetDeletionTimestamp() != nil:
		// Already asked; or being deleted, which its live owner finishes.
		return reconcile.Result{}, nil
	default:
		labels, what = map[string]any{s.drain: sharding.DrainValue}, "draining"
		count = func() { handoffsTotal.WithLabelValues(s.ringName).Inc() }
	}
	wctx, cancel, err := fencing.WriteContext(ctx, s.fence, begun)
	if err != nil {
		log.FromContext(ctx).Info("Not labelling: the leader's term ended since the ring was read", "ring", s.ringName, "reason", err.Error())
		return reconcile.Result{RequeueAfter: conflictRetry}, nil
	}
	defer cancel()
	if err := patchLabels(wctx, s.client, obj, labels); err != nil {
		if err = fencing.Cause(wctx, err); fencing.IsLapsed(err) {
			log.FromContext(ctx).Info("Not labelling: the leader's term ended during the write", "ring", s.ringName, "reason", err.Error())
			return reconcile.Result{RequeueAfter: conflictRetry}, nil
		}
		if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
			// The cache is behind the object: look again once it caught up.
			log.FromContext(ctx).V(1).Info("Object changed before its shard label did, looking again", "ring", s.ringName, "action", what, "labelled", current, "owner", owner)
			return reconcile.Result{RequeueAfter: conflictRetry}, nil
		}
		return reconcile.Result{}, fmt.Errorf("sharder of ring %s: %s %s %s (labelled %q, owner %q): %w", s.ringName, what, s.gvk.Kind, req.NamespacedName, current, owner, err)
	}
	log.FromContext(ctx).V(1).Info("Shard label changed", "ring", s.ringName, "action", what, "labelled", current, "owner", owner)
	if count != nil {
		count()
	}
	return reconcile.Result{}, nil
}

// enqueueAllOnRingChange is the sharder's source of ring changes: at each,
// it lists every object from the cache and looks at each again. The
// informer's initial list covers the objects at start.
func (s *sharder) enqueueAllOnRingChange(ctx context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
	changed := s.source.Changes()
	register(s)
	go func() {
		defer unregister(s)
		for {
			select {
			case <-ctx.Done():
				return
			case <-changed:
			}
			changed = s.source.Changes()
			list := s.newList()
			if err := s.reader.List(ctx, list); err != nil {
				if ctx.Err() == nil {
					log.FromContext(ctx).Error(err, "Listing the objects to re-evaluate after a ring change failed; they are looked at again at their next change", "ring", s.ringName, "kind", s.gvk.Kind)
				}
				continue
			}
			for i := range list.Items {
				q.Add(reconcile.Request{NamespacedName: types.NamespacedName{Namespace: list.Items[i].Namespace, Name: list.Items[i].Name}})
			}
		}
	}()
	return nil
}

// patchLabels sets (a string) or removes (nil) labels of obj in one merge
// patch that carries obj's resourceVersion, so that it applies only to the
// version the decision was made on.
func patchLabels(ctx context.Context, c client.Client, obj client.Object, labels map[string]any) error {
	if obj.GetResourceVersion() == "" {
		return errors.New("the object has no resourceVersion to patch against")
	}
	patch := map[string]any{"metadata": map[string]any{
		"resourceVersion": obj.GetResourceVersion(),
		"labels":          labels,
	}}
	data, err := json.Marshal(patch)
	if err != nil {
		return err
	}
	return c.Patch(ctx, obj, client.RawPatch(types.MergePatchType, data))
}

func isMember(r *ring.Ring, member string) bool { return slices.Contains(r.Members(), member) }

// deletionStarted passes the update in which an object's deletion began.
type deletionStarted struct {
	predicate.TypedFuncs[*metav1.PartialObjectMetadata]
}

func (deletionStarted) Update(e event.TypedUpdateEvent[*metav1.PartialObjectMetadata]) bool {
	return e.ObjectOld != nil && e.ObjectNew != nil && e.ObjectOld.GetDeletionTimestamp() == nil && e.ObjectNew.GetDeletionTimestamp() != nil
}

// NewCache returns a cache for the sharder of a replica's manager, whose own
// cache selects the replica's share of the primary kind: opts as given, with
// mgr's scheme, REST mapper and HTTP client unless set. The cache is added to
// mgr and runs on the elected leader only, as the sharder does.
func NewCache(mgr manager.Manager, opts cache.Options) (cache.Cache, error) {
	if opts.Scheme == nil {
		opts.Scheme = mgr.GetScheme()
	}
	if opts.Mapper == nil {
		opts.Mapper = mgr.GetRESTMapper()
	}
	if opts.HTTPClient == nil {
		opts.HTTPClient = mgr.GetHTTPClient()
	}
	c, err := cache.New(mgr.GetConfig(), opts)
	if err != nil {
		return nil, fmt.Errorf("sharding: the sharder's cache: %w", err)
	}
	if err := mgr.Add(onLeader{c}); err != nil {
		return nil, err
	}
	return c, nil
}

// onLeader runs a cache on the elected leader only: a cache's own
// NeedLeaderElection is false, and the sharder's cache of every object's
// metadata is of no use to the other replicas.
type onLeader struct{ cache.Cache }

func (onLeader) NeedLeaderElection() bool { return true }
