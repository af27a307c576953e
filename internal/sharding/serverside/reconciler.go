package serverside

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// ReconcilerOptions configure the reconciler of a replica.
type ReconcilerOptions struct {
	// Reader reads the primary object from the replica's cache, which holds
	// its share. Required.
	Reader client.Reader
	// NewObject returns an empty object of the primary kind, for Reader.
	// Required.
	NewObject func() client.Object
	// Barrier lets reconciles begin. Share one between every controller of
	// the replica that reconciles the kind. Required.
	Barrier *Barrier
	// Wait is how soon an object the Barrier keeps waiting is looked at
	// again. Defaults to 1s.
	Wait time.Duration
	// NotOwned is how soon an object the cache still holds but the ring
	// gives another member is looked at again, until the cache drops it (so
	// that an object that comes back before it does is not forgotten).
	// Defaults to 5s.
	NotOwned time.Duration
}

// NewReconciler wraps the replica's reconciler of the primary kind:
//
//   - an object missing from the cache is gone, or left the replica's share
//     (the API server no longer sends it): either way nothing is done, and
//     inner is not called (a deleted object's last reconcile happened while
//     the replica owned it);
//   - an object the Barrier lets begin is reconciled by inner;
//   - one the ring gives another member is not reconciled, and looked at
//     again after NotOwned while the cache holds it; one the Barrier keeps
//     waiting, after Wait.
func NewReconciler(inner reconcile.Reconciler, opts ReconcilerOptions) (reconcile.Reconciler, error) {
	if opts.Reader == nil || opts.NewObject == nil || opts.Barrier == nil {
		return nil, fmt.Errorf("sharding: the server-side reconciler of member %s needs a Reader, NewObject and a Barrier", memberOf(opts.Barrier))
	}
	if opts.Wait <= 0 {
		opts.Wait = time.Second
	}
	if opts.NotOwned <= 0 {
		opts.NotOwned = 5 * time.Second
	}
	return &shareReconciler{inner: inner, opts: opts}, nil
}

func memberOf(b *Barrier) string {
	if b == nil {
		return "?"
	}
	return b.opts.Member
}

type shareReconciler struct {
	inner reconcile.Reconciler
	opts  ReconcilerOptions
}

func (r *shareReconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	obj := r.opts.NewObject()
	if err := r.opts.Reader.Get(ctx, req.NamespacedName, obj); err != nil {
		if apierrors.IsNotFound(err) {
			return reconcile.Result{}, nil
		}
		return reconcile.Result{}, fmt.Errorf("member %s: reading %s to check its shard: %w", r.opts.Barrier.opts.Member, req.NamespacedName, err)
	}
	switch r.opts.Barrier.Begin(req.NamespacedName, obj.GetUID()) {
	case NotOwned:
		log.FromContext(ctx).V(1).Info("Not reconciling an object the ring gives another member", "member", r.opts.Barrier.opts.Member)
		return reconcile.Result{RequeueAfter: r.opts.NotOwned}, nil
	case Waiting:
		log.FromContext(ctx).V(1).Info("Waiting for the members of the ring to adopt it before reconciling", "member", r.opts.Barrier.opts.Member, "retryAfter", r.opts.Wait.String())
		return reconcile.Result{RequeueAfter: r.opts.Wait}, nil
	}
	defer r.opts.Barrier.End(req.NamespacedName)
	return r.inner.Reconcile(ctx, req)
}
