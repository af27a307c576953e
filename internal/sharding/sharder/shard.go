package sharder

import (
	"context"
	"fmt"

	"github.com/polyop/polyop/internal/sharding"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// Shard is one replica's part of a ring: what its informers select and how
// it reconciles and lets go of the objects it owns.
type Shard struct {
	// Ring is the ring's name: the sidecar's name.
	Ring string
	// Member is this replica's name in the ring, its Lease's holder: the
	// value of the shard label on the objects it owns.
	Member string
}

// NewShard returns member's shard of the ring, or an error when the names
// cannot be a label key and value.
func NewShard(ringName, member string) (Shard, error) {
	if member == "" {
		return Shard{}, fmt.Errorf("sharding: a shard of ring %q needs a member name", ringName)
	}
	if err := validateNames(ringName, member); err != nil {
		return Shard{}, err
	}
	return Shard{Ring: ringName, Member: member}, nil
}

// Selector selects the objects the shard owns,
// shard.sharding.polyop.dev/<ring>=<member>: the label selector of the
// replica's informers for the primary kind and its children, so the API
// server sends the replica only its share.
func (s Shard) Selector() labels.Selector {
	return labels.SelectorFromSet(labels.Set{sharding.ShardLabel(s.Ring): s.Member})
}

// Owns reports whether obj is labelled with the shard's member.
func (s Shard) Owns(obj client.Object) bool {
	return obj.GetLabels()[sharding.ShardLabel(s.Ring)] == s.Member
}

// ReconcilerOptions configure the reconciler of a shard.
type ReconcilerOptions struct {
	// Reader reads the primary object, from the replica's cache (selected by
	// Selector). Required.
	Reader client.Reader
	// Client patches the object's labels when the shard lets go of it.
	// Required.
	Client client.Client
	// NewObject returns an empty object of the primary kind, for Reader (an
	// unstructured.Unstructured with its GVK set, a typed object, or a
	// PartialObjectMetadata when the cache holds metadata). Required.
	NewObject func() client.Object
	// InFlight tracks the replica's reconciles of the primary kind; share one
	// between every controller of the replica that reconciles it. Defaults
	// to a tracker of this reconciler's own.
	InFlight *InFlight
}

// Reconciler wraps the replica's reconciler of the primary kind:
//
//   - an object not labelled with the shard's member is not reconciled (the
//     cache may still hold it a moment after it moved, and a delayed requeue
//     may come after that);
//   - an object labelled with it and with the drain label (and not being
//     deleted: a live owner finishes a deletion) is let go of: once no
//     reconcile of it is in flight in the replica, its shard and drain
//     labels are removed in one patch against the version read, and the
//     sharder labels it for its new owner;
//   - any other is reconciled by inner, tracked in InFlight.
func (s Shard) Reconciler(inner reconcile.Reconciler, opts ReconcilerOptions) (reconcile.Reconciler, error) {
	if err := validateNames(s.Ring, s.Member); err != nil {
		return nil, err
	}
	if opts.Reader == nil || opts.Client == nil || opts.NewObject == nil {
		return nil, fmt.Errorf("sharding: the reconciler of member %s of ring %s needs a Reader, a Client and NewObject", s.Member, s.Ring)
	}
	if opts.InFlight == nil {
		opts.InFlight = NewInFlight()
	}
	return &shardReconciler{shard: s, inner: inner, opts: opts}, nil
}

type shardReconciler struct {
	shard Shard
	inner reconcile.Reconciler
	opts  ReconcilerOptions
}

func (r *shardReconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	obj := r.opts.NewObject()
	if err := r.opts.Reader.Get(ctx, req.NamespacedName, obj); err != nil {
		if !apierrors.IsNotFound(err) {
			return reconcile.Result{}, fmt.Errorf("shard %s of ring %s: reading %s to check its shard: %w", r.shard.Member, r.shard.Ring, req.NamespacedName, err)
		}
		// Gone, or moved and dropped from the cache: nothing of ours to do.
		// (A deleted object's last reconcile happened while it was ours.)
		return reconcile.Result{}, nil
	}
	if !r.shard.Owns(obj) {
		log.FromContext(ctx).V(1).Info("Not reconciling an object another member of the ring owns", "ring", r.shard.Ring, "member", r.shard.Member, "owner", obj.GetLabels()[sharding.ShardLabel(r.shard.Ring)])
		return reconcile.Result{}, nil
	}
	if _, drain := obj.GetLabels()[sharding.DrainLabel(r.shard.Ring)]; drain && obj.GetDeletionTimestamp() == nil {
		return reconcile.Result{}, r.release(ctx, obj)
	}
	if !r.opts.InFlight.Begin(req.NamespacedName) {
		// Being let go of by another controller of this replica.
		return reconcile.Result{}, nil
	}
	defer r.opts.InFlight.End(req.NamespacedName)
	return r.inner.Reconcile(ctx, req)
}

// release lets go of obj once no reconcile of it is in flight: one patch
// removes the shard and drain labels, against the version read, so that it
// fails when the object changed since (a reconcile that was in flight wrote
// it); the requeue that follows reads it again.
func (r *shardReconciler) release(ctx context.Context, obj client.Object) error {
	key := client.ObjectKeyFromObject(obj)
	done, err := r.opts.InFlight.Drain(ctx, key)
	if err != nil {
		return fmt.Errorf("shard %s of ring %s: waiting for the reconciles of %s to finish before handing it off: %w", r.shard.Member, r.shard.Ring, key, err)
	}
	defer done()
	err = patchLabels(ctx, r.opts.Client, obj, map[string]any{sharding.ShardLabel(r.shard.Ring): nil, sharding.DrainLabel(r.shard.Ring): nil})
	switch {
	case err == nil:
		log.FromContext(ctx).V(1).Info("Handed the object off", "ring", r.shard.Ring, "member", r.shard.Member)
		return nil
	case apierrors.IsNotFound(err):
		return nil
	default:
		// A conflict too: the requeue reads the object again, and lets go of
		// it if it still must.
		return fmt.Errorf("shard %s of ring %s: removing its shard and drain labels from %s to hand it off: %w", r.shard.Member, r.shard.Ring, key, err)
	}
}
