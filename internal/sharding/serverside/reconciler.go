package serverside

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/resourceversion"
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
	// Live reads an object from the API server: the first reconcile of an
	// object that came into the replica's share waits until the cache holds
	// the version read (see Barrier.NeedsRead). Defaults to nil: the cache
	// is trusted.
	Live client.Reader
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
//   - an object the Barrier lets begin is reconciled by inner, once the
//     cache holds its current version, when it has just come into the
//     replica's share (see Barrier.NeedsRead);
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
	if r.opts.Live != nil && r.opts.Barrier.NeedsRead(obj.GetUID()) {
		current, err := r.current(ctx, req, obj)
		if err != nil || !current {
			return reconcile.Result{RequeueAfter: cacheWait}, err
		}
		r.opts.Barrier.Confirm(obj.GetUID())
	}
	return r.inner.Reconcile(ctx, req)
}

// cacheWait is how soon an object whose cached version is behind the API
// server's is looked at again: the list that brings it is usually done
// within milliseconds.
const cacheWait = 100 * time.Millisecond

// current reads obj, which came into the replica's share, from the API
// server and reports whether the cache holds that version or a newer one.
func (r *shareReconciler) current(ctx context.Context, req reconcile.Request, cached client.Object) (bool, error) {
	live := r.opts.NewObject()
	err := r.opts.Live.Get(ctx, req.NamespacedName, live)
	switch {
	case apierrors.IsNotFound(err):
		// Gone: its deletion reaches the cache, and nothing is done.
		return false, nil
	case err != nil:
		return false, fmt.Errorf("member %s: reading %s, which came into its share, to check its cache: %w", r.opts.Barrier.opts.Member, req.NamespacedName, err)
	}
	cmp, cmpErr := resourceversion.CompareResourceVersion(cached.GetResourceVersion(), live.GetResourceVersion())
	if live.GetUID() != cached.GetUID() || (cmpErr == nil && cmp < 0) || (cmpErr != nil && cached.GetResourceVersion() != live.GetResourceVersion()) {
		log.FromContext(ctx).V(1).Info("Waiting for the cache to hold the current version of an object that came into the share",
			"member", r.opts.Barrier.opts.Member, "cached", cached.GetResourceVersion(), "current", live.GetResourceVersion())
		return false, nil
	}
	return true, nil
}
