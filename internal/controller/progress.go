package controller

import (
	"context"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	polyopv1alpha1 "github.com/polyop/polyop/sdk/go/gen/polyop/v1alpha1"
)

// CacheProgress tracks how far the controllers have seen each kind, so that
// a sidecar that keeps its own copy of a kind through the Cluster service's
// Watch reads, in a call, at least what triggered it ("read your trigger"),
// as a reconciler in a controller-runtime manager reads an informer cache
// that holds every change before any handler runs. The host's Cluster
// service implements it (cluster.CacheProgress).
type CacheProgress interface {
	// Seen records that a controller's event handler got obj, of kind gvk.
	Seen(gvk schema.GroupVersionKind, obj client.Object)
	// Versions returns the cache versions of the next call to the sidecar
	// (ReconcileRequest.cache_versions), once the Watch streams of each
	// kind have caught up with what Seen recorded, waiting (bounded) for
	// them. It returns nil at once before a sidecar first watches a kind.
	Versions(ctx context.Context) []*polyopv1alpha1.CacheVersion
}

// cacheVersions are the cache versions of the next call; nil without a
// CacheProgress.
func (r *Reconciler) cacheVersions(ctx context.Context) []*polyopv1alpha1.CacheVersion {
	if r.progress == nil {
		return nil
	}
	return r.progress.Versions(ctx)
}

// seeing wraps h so that every event it handles is first recorded in p as
// seen, for kind gvk; h itself when p is nil.
func seeing(p CacheProgress, gvk schema.GroupVersionKind, h handler.EventHandler) handler.EventHandler {
	if p == nil {
		return h
	}
	return &seeingHandler{progress: p, gvk: gvk, next: h}
}

// seenPredicates are the predicates that record, in p, every event of the
// reconciled kind gvk, before any filter drops it (they pass every event);
// none when p is nil.
func seenPredicates(p CacheProgress, gvk schema.GroupVersionKind) []predicate.Predicate {
	if p == nil {
		return nil
	}
	return []predicate.Predicate{predicate.NewPredicateFuncs(func(obj client.Object) bool {
		p.Seen(gvk, obj)
		return true
	})}
}

// seeingHandler records each event's object in progress, then hands the
// event to next.
type seeingHandler struct {
	progress CacheProgress
	gvk      schema.GroupVersionKind
	next     handler.EventHandler
}

var _ handler.EventHandler = &seeingHandler{}

type queue = workqueue.TypedRateLimitingInterface[reconcile.Request]

// Create implements handler.EventHandler.
func (h *seeingHandler) Create(ctx context.Context, e event.CreateEvent, q queue) {
	h.progress.Seen(h.gvk, e.Object)
	h.next.Create(ctx, e, q)
}

// Update implements handler.EventHandler.
func (h *seeingHandler) Update(ctx context.Context, e event.UpdateEvent, q queue) {
	h.progress.Seen(h.gvk, e.ObjectNew)
	h.next.Update(ctx, e, q)
}

// Delete implements handler.EventHandler.
func (h *seeingHandler) Delete(ctx context.Context, e event.DeleteEvent, q queue) {
	h.progress.Seen(h.gvk, e.Object)
	h.next.Delete(ctx, e, q)
}

// Generic implements handler.EventHandler.
func (h *seeingHandler) Generic(ctx context.Context, e event.GenericEvent, q queue) {
	h.progress.Seen(h.gvk, e.Object)
	h.next.Generic(ctx, e, q)
}
