package sidecartest

import (
	"context"

	"sigs.k8s.io/controller-runtime/pkg/client"

	polyopv1alpha1 "github.com/polyop/polyop/sdk/go/gen/polyop/v1alpha1"
	"github.com/polyop/polyop/sdk/go/sidecar"
)

// FinalizeResponse is a Server's answer to one Finalize, in the terms a test
// checks.
type FinalizeResponse struct {
	// Result is RequeueAfter: finalizing is not done, call again after it.
	Result sidecar.Result
	// Err is Finalize's error; nil when it succeeded.
	Err *Error
	// Events are the events Finalize recorded, in order.
	Events []Event
	// Raw is the response as it crossed the wire.
	Raw *polyopv1alpha1.FinalizeResponse
}

// Done reports whether the host would remove the finalizer: no error and no
// RequeueAfter.
func (r *FinalizeResponse) Done() bool {
	return r.Err == nil && r.Result.RequeueAfter <= 0
}

// Finalize asks the named controller to finalize obj, as the host does for an
// object being deleted that carries the controller's finalizer. Give obj a
// deletionTimestamp, as the host's would have. It fails the test if the
// Server answers with a gRPC error.
func (h *Harness) Finalize(ctx context.Context, controller string, obj client.Object, opts ...RequestOption) *FinalizeResponse {
	h.t.Helper()
	resp, err := h.CallFinalize(ctx, h.NewFinalizeRequest(controller, obj, opts...))
	if err != nil {
		h.t.Fatalf("sidecartest: Finalize %s/%s with controller %q: %v", obj.GetNamespace(), obj.GetName(), controller, err)
	}
	out := &FinalizeResponse{Raw: resp, Result: sidecar.Result{RequeueAfter: resp.GetRequeueAfter().AsDuration()}, Err: errorOf(resp.GetError())}
	for _, e := range resp.GetEvents() {
		out.Events = append(out.Events, Event{Type: eventType(e.GetType()), Reason: e.GetReason(), Message: e.GetMessage(), Action: e.GetAction()})
	}
	return out
}

// NewFinalizeRequest builds the request the host sends to finalize obj with
// the named controller. Of the RequestOptions, only WithRetries applies.
func (h *Harness) NewFinalizeRequest(controller string, obj client.Object, opts ...RequestOption) *polyopv1alpha1.FinalizeRequest {
	h.t.Helper()
	r := h.NewRequest(controller, obj, opts...)
	return &polyopv1alpha1.FinalizeRequest{
		Controller: r.GetController(),
		Kind:       r.GetKind(),
		Key:        r.GetKey(),
		Object:     r.GetObject(),
		Retries:    r.GetRetries(),
	}
}

// CallFinalize sends req to the Server as the host would, through the
// protobuf wire encoding, and returns its answer, gRPC errors included.
func (h *Harness) CallFinalize(ctx context.Context, req *polyopv1alpha1.FinalizeRequest) (*polyopv1alpha1.FinalizeResponse, error) {
	h.t.Helper()
	resp, err := h.svc.Finalize(ctx, roundTrip(h.t, req))
	if err != nil {
		return nil, err
	}
	return roundTrip(h.t, resp), nil
}
