package sidecar

import (
	"context"
	"errors"
	"fmt"
	"reflect"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// CompleteRequests registers r, a controller-runtime reconcile.Reconciler,
// as the controller's reconciler, so that a reconciler written for
// controller-runtime runs in the sidecar unchanged: each object's key is
// handed to r as a reconcile.Request, also when the object is gone, as
// controller-runtime does.
//
// Such a reconciler reads and writes through a client.Client (give it the
// Server's GetClient) and writes the status itself, so the response leaves the
// status as it is: the host writes none.
func (b *Builder[T]) CompleteRequests(r reconcile.Reconciler) error {
	if r == nil || (reflect.ValueOf(r).Kind() == reflect.Pointer && reflect.ValueOf(r).IsNil()) {
		return fmt.Errorf("sidecar: registering the controller for %s: %w", reflect.TypeFor[T](), errors.New("the reconciler is nil"))
	}
	return b.Complete(&requestReconciler[T]{r: r})
}

// requestReconciler runs a controller-runtime reconcile.Reconciler as a
// Reconciler[T].
type requestReconciler[T client.Object] struct {
	r reconcile.Reconciler
}

func (a *requestReconciler[T]) Reconcile(ctx context.Context, obj T) (Result, error) {
	if st := stateFrom(ctx); st != nil {
		st.mu.Lock()
		st.leaveStatus = true
		st.mu.Unlock()
	}
	return a.r.Reconcile(ctx, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(obj)})
}

func (a *requestReconciler[T]) ReconcileDeleted(ctx context.Context, req Request) (Result, error) {
	return a.r.Reconcile(ctx, reconcile.Request{NamespacedName: req.NamespacedName})
}
