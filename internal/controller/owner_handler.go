package controller

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// ownerHandler is what handler.EnqueueRequestForOwner with
// handler.OnlyControllerOwner does for an owned kind: it enqueues the
// controller owner of each event's object (of the old and the new object of
// an update) when that owner is of the reconciled kind, by its name, in the
// object's namespace unless the reconciled kind is cluster-scoped. The
// reconciled kind's scope is resolved once, at setup, rather than asked of
// the REST mapper on every event of every child, as EnqueueRequestForOwner
// does (a lookup that allocates about a kilobyte each time). The one
// difference: an owner reference at a version of the kind the API server
// does not serve enqueues its owner, where EnqueueRequestForOwner logs that
// it finds no mapping and drops the event.
type ownerHandler struct {
	// owner is the reconciled kind.
	owner schema.GroupKind
	// namespaced is true when the reconciled kind lives in namespaces.
	namespaced bool
}

var _ handler.EventHandler = ownerHandler{}

// request is the request of obj's controller owner, if it is of the
// reconciled kind.
func (h ownerHandler) request(ctx context.Context, obj client.Object) (reconcile.Request, bool) {
	if obj == nil {
		return reconcile.Request{}, false
	}
	ref := metav1.GetControllerOfNoCopy(obj)
	if ref == nil || ref.Kind != h.owner.Kind {
		return reconcile.Request{}, false
	}
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil {
		logf.FromContext(ctx).Error(err, "could not parse the apiVersion of an object's controller owner reference",
			"object", types.NamespacedName{Namespace: obj.GetNamespace(), Name: obj.GetName()}, "apiVersion", ref.APIVersion)
		return reconcile.Request{}, false
	}
	if gv.Group != h.owner.Group {
		return reconcile.Request{}, false
	}
	req := reconcile.Request{NamespacedName: types.NamespacedName{Name: ref.Name}}
	if h.namespaced {
		req.Namespace = obj.GetNamespace()
	}
	return req, true
}

// Create implements handler.EventHandler.
func (h ownerHandler) Create(ctx context.Context, e event.CreateEvent, q queue) {
	if req, ok := h.request(ctx, e.Object); ok {
		q.Add(req)
	}
}

// Update implements handler.EventHandler.
func (h ownerHandler) Update(ctx context.Context, e event.UpdateEvent, q queue) {
	old, okOld := h.request(ctx, e.ObjectOld)
	if okOld {
		q.Add(old)
	}
	if req, ok := h.request(ctx, e.ObjectNew); ok && (!okOld || req != old) {
		q.Add(req)
	}
}

// Delete implements handler.EventHandler.
func (h ownerHandler) Delete(ctx context.Context, e event.DeleteEvent, q queue) {
	if req, ok := h.request(ctx, e.Object); ok {
		q.Add(req)
	}
}

// Generic implements handler.EventHandler.
func (h ownerHandler) Generic(ctx context.Context, e event.GenericEvent, q queue) {
	if req, ok := h.request(ctx, e.Object); ok {
		q.Add(req)
	}
}
