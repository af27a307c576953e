package sidecar

import (
	"context"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	polyopv1alpha1 "github.com/polyop/polyop/sdk/go/gen/polyop/v1alpha1"
	"github.com/polyop/polyop/sdk/go/internal/cacheversions"
)

// FinalizeReconciler is implemented by a Reconciler whose controller declares
// a finalizer (Builder.WithFinalizer). When an object carrying the finalizer
// is being deleted, the host calls Finalize instead of Reconcile, and removes
// the finalizer once Finalize returns no error and no RequeueAfter. Without
// WithFinalizer, Finalize is never called.
//
// obj is decoded as for Reconcile, with its deletionTimestamp set. Finalize
// cleans up what the object made outside its owned children (those go with
// the object through garbage collection); changes to obj are not written.
// Return RequeueAfter while clean-up waits on something outside, to be called
// again after it with the finalizer kept; an error keeps the finalizer too,
// and is retried with backoff unless it is a TerminalError (or after its delay,
// for a TemporaryError). Result.Requeue alone (without RequeueAfter) is
// reported as an error, as for Reconcile, so that the host retries with
// backoff and keeps the finalizer. Recorder(ctx) records events on the object.
type FinalizeReconciler[T client.Object] interface {
	Finalize(ctx context.Context, obj T) (Result, error)
}

// Finalize decodes the request's object into the controller's type and calls
// its FinalizeReconciler. It answers with gRPC status NOT_FOUND for a
// controller that is not registered, FAILED_PRECONDITION for one that declares
// no finalizer and INVALID_ARGUMENT for a request without a name or with an
// object that does not decode. Errors from Finalize, and panics, are reported
// in the response.
func (s *service) Finalize(ctx context.Context, in *polyopv1alpha1.FinalizeRequest) (*polyopv1alpha1.FinalizeResponse, error) {
	s.mu.RLock()
	c, ok := s.controllers[in.GetController()]
	s.mu.RUnlock()
	if !ok {
		return nil, status.Errorf(codes.NotFound, "sidecar %q has no controller named %q; it has %q", s.opts.Name, in.GetController(), s.controllerNames())
	}
	if c.finalize == nil {
		return nil, status.Errorf(codes.FailedPrecondition, "controller %q declares no finalizer", in.GetController())
	}
	if in.GetKey().GetName() == "" {
		return nil, status.Errorf(codes.InvalidArgument, "controller %q: the request has no object name", in.GetController())
	}
	if len(in.GetObject()) == 0 {
		return nil, status.Errorf(codes.InvalidArgument, "controller %q: the request has no object to finalize", in.GetController())
	}
	kind := c.gvk
	if k := in.GetKind(); k.GetKind() != "" {
		kind = schema.GroupVersionKind{Group: k.GetGroup(), Version: k.GetVersion(), Kind: k.GetKind()}
	}
	req := Request{
		Controller:     in.GetController(),
		Kind:           kind,
		NamespacedName: types.NamespacedName{Namespace: in.GetKey().GetNamespace(), Name: in.GetKey().GetName()},
		Retries:        int(in.GetRetries()),
	}
	log := s.log.WithValues("controller", req.Controller, "kind", req.Kind.Kind, "namespace", req.Namespace, "name", req.Name, "finalizer", c.desc.GetFinalizer())
	if req.Retries > 0 {
		log = log.WithValues("retries", req.Retries)
	}
	ctx = withCallLogger(ctx, log)
	ctx = withRequest(ctx, req)
	ctx = cacheversions.With(ctx, in.GetCacheVersions())
	annotateSpan(ctx, req)
	resp, err := c.finalize(ctx, req, in.GetObject())
	recordResult(ctx, resp, err)
	return resp, err
}

// finalizer returns the function that finalizes the objects of c, or nil
// when its reconciler is not a FinalizeReconciler.
func (c *typedController[T]) finalizer() func(ctx context.Context, req Request, object []byte) (*polyopv1alpha1.FinalizeResponse, error) {
	f, ok := c.reconciler.(FinalizeReconciler[T])
	if !ok {
		return nil
	}
	return func(ctx context.Context, req Request, data []byte) (*polyopv1alpha1.FinalizeResponse, error) {
		obj, err := c.decode(data)
		if err != nil {
			return nil, status.Errorf(codes.InvalidArgument, "controller %q: decoding %s %s: %v", c.name, req.Kind.Kind, req.NamespacedName, err)
		}
		if obj.GetName() != req.Name || obj.GetNamespace() != req.Namespace {
			return nil, status.Errorf(codes.InvalidArgument, "controller %q: the object is %s %s/%s, but the request is for %s",
				c.name, req.Kind.Kind, obj.GetNamespace(), obj.GetName(), req.NamespacedName)
		}
		log := logf.FromContext(ctx)
		events := &eventCollector{}
		ctx = context.WithValue(ctx, recorderKey{}, events)
		result, panicked, err := callSafely(log, func() (Result, error) {
			return f.Finalize(ctx, obj)
		})
		decided := decision(log, result, panicked, err)
		resp := &polyopv1alpha1.FinalizeResponse{Error: decided.GetError(), Events: events.collected()}
		if result.RequeueAfter > 0 {
			resp.RequeueAfter = durationpb.New(result.RequeueAfter)
		}
		return resp, nil
	}
}
