package controller

import (
	"context"
	"fmt"

	"go.opentelemetry.io/otel/attribute"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/polyop/polyop/internal/fencing"
	"github.com/polyop/polyop/internal/object"
	polyopv1alpha1 "github.com/polyop/polyop/sdk/go/gen/polyop/v1alpha1"
)

// finalize handles an object that is being deleted, for a controller that
// declares a finalizer: while the object carries the finalizer, the sidecar's
// Finalize is called, and the finalizer is removed once it reports success.
// A failure keeps the finalizer and is retried as Reconcile's are (after
// retry_after, or with backoff, or on the next event for a terminal one);
// requeue_after calls Finalize again after that long. An object without the
// finalizer is left to whoever else holds it: the sidecar is not called.
//
// The call runs in a span of its own, under the reconcile's.
func (r *Reconciler) finalize(ctx context.Context, req reconcile.Request, obj *object.Object) (res reconcile.Result, err error) {
	ctx, span := r.startReconcile(ctx, spanFinalize, req)
	defer func() { endReconcile(span, res, err) }()
	return r.finalizeObject(ctx, req, obj)
}

func (r *Reconciler) finalizeObject(ctx context.Context, req reconcile.Request, obj *object.Object) (reconcile.Result, error) {
	log := logf.FromContext(ctx)
	if !controllerutil.ContainsFinalizer(obj, r.Controller.Finalizer) {
		log.V(1).Info("the object is being deleted and no longer carries the finalizer; nothing to do", "finalizer", r.Controller.Finalizer)
		return reconcile.Result{}, nil
	}
	raw, err := obj.MarshalJSON()
	if err != nil {
		return reconcile.Result{}, fmt.Errorf("encoding %s %s: %w", r.Controller.GVK.Kind, req.NamespacedName, err)
	}
	call := &polyopv1alpha1.FinalizeRequest{
		Controller: r.Controller.Name,
		Kind:       r.kind,
		Key:        &polyopv1alpha1.ObjectKey{Namespace: req.Namespace, Name: req.Name},
		Object:     raw,
	}
	call.Retries = int32(r.limiter.NumRequeues(req))
	call.CacheVersions = r.cacheVersions(ctx)
	resp, err := r.Sidecar.Finalize(ctx, call)
	if err != nil {
		return reconcile.Result{}, r.callFailed(log, "Finalize", err)
	}
	r.callAnswered(log)
	if err := r.termLapsed(ctx); err != nil {
		return discardLapsed(log, "the Finalize call", err)
	}
	if err := checkFailure(resp.GetError()); err != nil {
		return reconcile.Result{}, r.refuseCallAnswer(obj, "Finalize", ReasonInvalidFailure, err)
	}
	r.recordEvents(obj, resp.GetEvents())
	r.recordFailure(obj, ReasonFinalizeFailed, resp.GetError())

	result, err := decide(&polyopv1alpha1.ReconcileResponse{Error: resp.GetError(), RequeueAfter: resp.GetRequeueAfter()})
	if err != nil || result.RequeueAfter > 0 {
		if err == nil {
			log.V(1).Info("the sidecar is not done finalizing; keeping the finalizer", "requeueAfter", result.RequeueAfter)
		}
		return result, err
	}
	if err := r.patchFinalizers(ctx, obj, controllerutil.RemoveFinalizer, spanRemoveFinalizer); err != nil {
		if fencing.IsLapsed(err) {
			return discardLapsed(log, "removing the finalizer", err)
		}
		if apierrors.IsConflict(err) {
			return reconcile.Result{Requeue: true}, nil //nolint:staticcheck // rate-limited retry of a stale patch
		}
		if apierrors.IsNotFound(err) {
			return reconcile.Result{}, nil
		}
		return reconcile.Result{}, err
	}
	log.V(1).Info("the sidecar finalized the object; removed the finalizer", "finalizer", r.Controller.Finalizer)
	return reconcile.Result{}, nil
}

// patchFinalizers applies change (controllerutil.AddFinalizer or
// RemoveFinalizer) to obj's finalizers and writes them with a merge patch
// that carries obj's resourceVersion (controller-runtime's MergeFrom with an
// optimistic lock), so that finalizers others changed meanwhile are never
// overwritten: a stale object is a conflict. obj is updated to what the API
// server stored. The write runs in a span named spanName.
func (r *Reconciler) patchFinalizers(ctx context.Context, obj *object.Object, change func(client.Object, string) bool, spanName string) error {
	base := obj.DeepCopy()
	if !change(obj, r.Controller.Finalizer) {
		return nil
	}
	ctx, span := r.startWrite(ctx, spanName, attribute.String("polyop.finalizer", r.Controller.Finalizer))
	patch := client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})
	err := r.patch(ctx, obj, patch, false)
	endSpan(span, err)
	if err != nil {
		if apierrors.IsConflict(err) || apierrors.IsNotFound(err) || fencing.IsLapsed(err) {
			return err
		}
		return fmt.Errorf("writing the finalizers of %s %s/%s: %w", obj.Kind, obj.GetNamespace(), obj.GetName(), err)
	}
	return nil
}
