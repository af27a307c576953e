package sidecartest

import (
	"context"
	"encoding/json"
	"reflect"
	"testing"

	"google.golang.org/protobuf/proto"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	sigsjson "sigs.k8s.io/json"

	polyopv1alpha1 "github.com/polyop/polyop/sdk/go/gen/polyop/v1alpha1"
	"github.com/polyop/polyop/sdk/go/internal/sidecarservice"
	"github.com/polyop/polyop/sdk/go/sidecar"
)

// HostVersion is the host version a Harness announces in its DescribeRequest.
const HostVersion = "sidecartest"

// Harness calls a Server's reconcilers the way the host does. Create one with
// New.
type Harness struct {
	t   testing.TB
	srv *sidecar.Server
	// svc is srv's gRPC service, which the Harness calls as the host does.
	svc polyopv1alpha1.SidecarServiceServer
}

// New returns a Harness for srv, whose controllers are registered already.
func New(t testing.TB, srv *sidecar.Server) *Harness {
	t.Helper()
	if srv == nil {
		t.Fatal("sidecartest: the server is nil")
	}
	return &Harness{t: t, srv: srv, svc: sidecarservice.Of(srv)}
}

// Describe returns the Server's answer to the host's handshake.
func (h *Harness) Describe() *polyopv1alpha1.DescribeResponse {
	h.t.Helper()
	req := &polyopv1alpha1.DescribeRequest{ProtocolVersion: sidecar.ProtocolVersion, HostVersion: HostVersion}
	resp, err := h.svc.Describe(context.Background(), roundTrip(h.t, req))
	if err != nil {
		h.t.Fatalf("sidecartest: Describe: %v", err)
	}
	return roundTrip(h.t, resp)
}

// RequestOption changes a ReconcileRequest built by the Harness.
type RequestOption func(*polyopv1alpha1.ReconcileRequest)

// WithRetries sets the request's retry count, as the host does after n failed
// attempts in a row.
func WithRetries(n int) RequestOption {
	return func(req *polyopv1alpha1.ReconcileRequest) { req.Retries = int32(n) }
}

// NewRequest builds the request the host sends to reconcile obj with the named
// controller: the object as JSON with its apiVersion and kind, which come from
// the Server's scheme.
func (h *Harness) NewRequest(controller string, obj client.Object, opts ...RequestOption) *polyopv1alpha1.ReconcileRequest {
	h.t.Helper()
	gvk, err := apiutil.GVKForObject(obj, h.srv.Scheme())
	if err != nil {
		h.t.Fatalf("sidecartest: finding the kind of %T: %v", obj, err)
	}
	obj = obj.DeepCopyObject().(client.Object)
	obj.GetObjectKind().SetGroupVersionKind(gvk)
	data, err := json.Marshal(obj)
	if err != nil {
		h.t.Fatalf("sidecartest: encoding %T: %v", obj, err)
	}
	req := &polyopv1alpha1.ReconcileRequest{
		Controller: controller,
		Kind:       &polyopv1alpha1.GroupVersionKind{Group: gvk.Group, Version: gvk.Version, Kind: gvk.Kind},
		Key:        &polyopv1alpha1.ObjectKey{Namespace: obj.GetNamespace(), Name: obj.GetName()},
		Object:     data,
	}
	for _, opt := range opts {
		opt(req)
	}
	return req
}

// Call sends req to the Server as the host would, through the protobuf wire
// encoding, and returns its answer, gRPC errors included.
func (h *Harness) Call(ctx context.Context, req *polyopv1alpha1.ReconcileRequest) (*polyopv1alpha1.ReconcileResponse, error) {
	h.t.Helper()
	resp, err := h.svc.Reconcile(ctx, roundTrip(h.t, req))
	if err != nil {
		return nil, err
	}
	return roundTrip(h.t, resp), nil
}

// Reconcile reconciles obj with the named controller. It fails the test if the
// Server answers with a gRPC error; an error from the reconciler is in the
// Response.
func (h *Harness) Reconcile(ctx context.Context, controller string, obj client.Object, opts ...RequestOption) *Response {
	h.t.Helper()
	req := h.NewRequest(controller, obj, opts...)
	return h.do(ctx, req)
}

// ReconcileDeleted tells the named controller that the object named key is
// gone, as the host does after a deletion.
func (h *Harness) ReconcileDeleted(ctx context.Context, controller string, key types.NamespacedName, opts ...RequestOption) *Response {
	h.t.Helper()
	req := &polyopv1alpha1.ReconcileRequest{
		Controller: controller,
		Key:        &polyopv1alpha1.ObjectKey{Namespace: key.Namespace, Name: key.Name},
	}
	for _, c := range h.Describe().GetControllers() {
		if c.GetName() == controller {
			req.Kind = c.GetForKind()
		}
	}
	for _, opt := range opts {
		opt(req)
	}
	return h.do(ctx, req)
}

func (h *Harness) do(ctx context.Context, req *polyopv1alpha1.ReconcileRequest) *Response {
	h.t.Helper()
	resp, err := h.Call(ctx, req)
	if err != nil {
		h.t.Fatalf("sidecartest: Reconcile %s %s/%s with controller %q: %v",
			req.GetKind().GetKind(), req.GetKey().GetNamespace(), req.GetKey().GetName(), req.GetController(), err)
	}
	return newResponse(h.t, req.GetObject(), resp)
}

// roundTrip passes m through the protobuf wire encoding, as the network would:
// it catches what cannot cross the wire, such as strings that are not UTF-8.
func roundTrip[M proto.Message](t testing.TB, m M) M {
	t.Helper()
	data, err := proto.Marshal(m)
	if err != nil {
		t.Fatalf("sidecartest: %T cannot cross the wire: %v", m, err)
	}
	out := m.ProtoReflect().New().Interface().(M)
	if err := proto.Unmarshal(data, out); err != nil {
		t.Fatalf("sidecartest: decoding %T: %v", m, err)
	}
	return out
}

// statusInto decodes object, with its status replaced by st when st is set,
// into into.
func statusInto(object, st []byte, into client.Object) error {
	var fields map[string]json.RawMessage
	if err := sigsjson.UnmarshalCaseSensitivePreserveInts(object, &fields); err != nil {
		return err
	}
	if len(st) > 0 {
		fields["status"] = st
	}
	data, err := json.Marshal(fields)
	if err != nil {
		return err
	}
	if v := reflect.ValueOf(into); v.Kind() == reflect.Pointer && !v.IsNil() {
		v.Elem().SetZero()
	}
	return sigsjson.UnmarshalCaseSensitivePreserveInts(data, into)
}
