package sidecartest

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	sigsjson "sigs.k8s.io/json"

	polyopv1alpha1 "github.com/polyop/polyop/sdk/go/gen/polyop/v1alpha1"
)

// AdmissionOption changes an AdmissionRequest built by the Harness.
type AdmissionOption func(*polyopv1alpha1.AdmissionRequest)

// DryRun marks the request a dry run, as kubectl's --dry-run=server does.
func DryRun() AdmissionOption {
	return func(req *polyopv1alpha1.AdmissionRequest) { req.DryRun = true }
}

// Subresource sets the subresource the request is for, for example "status"
// or "scale", as for a webhook whose rules name "widgets/status". Without
// it, the request is for the main resource.
func Subresource(name string) AdmissionOption {
	return func(req *polyopv1alpha1.AdmissionRequest) { req.Subresource = name }
}

// AsUser sets the requesting user.
func AsUser(name string, groups ...string) AdmissionOption {
	return func(req *polyopv1alpha1.AdmissionRequest) {
		req.UserInfo = &polyopv1alpha1.UserInfo{Username: name, Groups: groups}
	}
}

// AdmissionResponse is a Server's answer to one admission call, in the terms
// a test checks.
type AdmissionResponse struct {
	// Allowed is false when the webhook refused the request.
	Allowed bool
	// Denial says why the request was refused; nil when it was allowed.
	Denial *Denial
	// Warnings are the warnings returned to the client.
	Warnings []string
	// Defaulted is the defaulted object as JSON, for Default; nil when the
	// defaulter changed nothing.
	Defaulted []byte

	t      testing.TB
	object []byte // the request's object
}

// Denial is a refused admission request.
type Denial struct {
	// Message is the denial's message.
	Message string
	// FieldErrors are the fields at fault, as the host receives them: their
	// bad values decoded from JSON (strings, int64 or float64 numbers,
	// booleans, or the JSON itself).
	FieldErrors field.ErrorList
}

// Object decodes into into the object as the API server would store it: the
// defaulted object, or the request's when the defaulter changed nothing.
func (r *AdmissionResponse) Object(into client.Object) {
	r.t.Helper()
	data := r.Defaulted
	if data == nil {
		data = r.object
	}
	if v := reflect.ValueOf(into); v.Kind() == reflect.Pointer && !v.IsNil() {
		v.Elem().SetZero()
	}
	if err := sigsjson.UnmarshalCaseSensitivePreserveInts(data, into); err != nil {
		r.t.Fatalf("sidecartest: decoding the defaulted object into %T: %v", into, err)
	}
}

// NewAdmissionRequest builds the request the host sends for an operation on
// obj (old is the object before an update, or the object being deleted), as
// JSON with apiVersion and kind from the Server's scheme.
func (h *Harness) NewAdmissionRequest(op polyopv1alpha1.Operation, obj, old client.Object, opts ...AdmissionOption) *polyopv1alpha1.AdmissionRequest {
	h.t.Helper()
	ref := obj
	if ref == nil {
		ref = old
	}
	gvk, err := apiutil.GVKForObject(ref, h.srv.Scheme())
	if err != nil {
		h.t.Fatalf("sidecartest: finding the kind of %T: %v", ref, err)
	}
	req := &polyopv1alpha1.AdmissionRequest{
		Uid:       "sidecartest",
		Kind:      &polyopv1alpha1.GroupVersionKind{Group: gvk.Group, Version: gvk.Version, Kind: gvk.Kind},
		Key:       &polyopv1alpha1.ObjectKey{Namespace: ref.GetNamespace(), Name: ref.GetName()},
		Operation: op,
		UserInfo:  &polyopv1alpha1.UserInfo{Username: "sidecartest"},
	}
	encode := func(o client.Object) []byte {
		o = o.DeepCopyObject().(client.Object)
		o.GetObjectKind().SetGroupVersionKind(gvk)
		data, err := json.Marshal(o)
		if err != nil {
			h.t.Fatalf("sidecartest: encoding %T: %v", o, err)
		}
		return data
	}
	if obj != nil {
		req.Object = encode(obj)
	}
	if old != nil {
		req.OldObject = encode(old)
	}
	for _, opt := range opts {
		opt(req)
	}
	return req
}

// Default calls the defaulter of obj's kind for its creation.
func (h *Harness) Default(ctx context.Context, obj client.Object, opts ...AdmissionOption) *AdmissionResponse {
	h.t.Helper()
	req := h.NewAdmissionRequest(polyopv1alpha1.Operation_OPERATION_CREATE, obj, nil, opts...)
	resp, err := h.CallDefault(ctx, &polyopv1alpha1.DefaultRequest{Request: req})
	if err != nil {
		h.t.Fatalf("sidecartest: Default %s: %v", req.GetKind().GetKind(), err)
	}
	r := &AdmissionResponse{t: h.t, object: req.GetObject(), Allowed: resp.GetDenied() == nil, Warnings: resp.GetWarnings(), Defaulted: resp.GetObject()}
	r.Denial = denialOf(resp.GetDenied())
	return r
}

// ValidateCreate calls the validator of obj's kind for its creation.
func (h *Harness) ValidateCreate(ctx context.Context, obj client.Object, opts ...AdmissionOption) *AdmissionResponse {
	h.t.Helper()
	return h.validate(ctx, h.NewAdmissionRequest(polyopv1alpha1.Operation_OPERATION_CREATE, obj, nil, opts...))
}

// ValidateUpdate calls the validator of obj's kind for its update from old.
func (h *Harness) ValidateUpdate(ctx context.Context, old, obj client.Object, opts ...AdmissionOption) *AdmissionResponse {
	h.t.Helper()
	return h.validate(ctx, h.NewAdmissionRequest(polyopv1alpha1.Operation_OPERATION_UPDATE, obj, old, opts...))
}

// ValidateDelete calls the validator of obj's kind for its deletion.
func (h *Harness) ValidateDelete(ctx context.Context, obj client.Object, opts ...AdmissionOption) *AdmissionResponse {
	h.t.Helper()
	return h.validate(ctx, h.NewAdmissionRequest(polyopv1alpha1.Operation_OPERATION_DELETE, nil, obj, opts...))
}

func (h *Harness) validate(ctx context.Context, req *polyopv1alpha1.AdmissionRequest) *AdmissionResponse {
	h.t.Helper()
	resp, err := h.CallValidate(ctx, &polyopv1alpha1.ValidateRequest{Request: req})
	if err != nil {
		h.t.Fatalf("sidecartest: Validate %s %s: %v", req.GetOperation(), req.GetKind().GetKind(), err)
	}
	return &AdmissionResponse{t: h.t, object: req.GetObject(), Allowed: resp.GetDenied() == nil, Warnings: resp.GetWarnings(), Denial: denialOf(resp.GetDenied())}
}

// CallDefault sends req to the Server's Default as the host would, through
// the protobuf wire encoding, and returns its answer, gRPC errors included.
func (h *Harness) CallDefault(ctx context.Context, req *polyopv1alpha1.DefaultRequest) (*polyopv1alpha1.DefaultResponse, error) {
	h.t.Helper()
	resp, err := h.svc.Default(ctx, roundTrip(h.t, req))
	if err != nil {
		return nil, err
	}
	return roundTrip(h.t, resp), nil
}

// CallValidate sends req to the Server's Validate as the host would.
func (h *Harness) CallValidate(ctx context.Context, req *polyopv1alpha1.ValidateRequest) (*polyopv1alpha1.ValidateResponse, error) {
	h.t.Helper()
	resp, err := h.svc.Validate(ctx, roundTrip(h.t, req))
	if err != nil {
		return nil, err
	}
	return roundTrip(h.t, resp), nil
}

// CallConvert sends req to the Server's Convert as the host would.
func (h *Harness) CallConvert(ctx context.Context, req *polyopv1alpha1.ConvertRequest) (*polyopv1alpha1.ConvertResponse, error) {
	h.t.Helper()
	resp, err := h.svc.Convert(ctx, roundTrip(h.t, req))
	if err != nil {
		return nil, err
	}
	return roundTrip(h.t, resp), nil
}

// Convert converts obj to the version of into's type, as the API server asks
// the host to, and decodes the result into into. It returns the conversion's
// error, and fails the test on a gRPC error.
func (h *Harness) Convert(ctx context.Context, obj, into client.Object) error {
	h.t.Helper()
	scheme := h.srv.Scheme()
	src, err := apiutil.GVKForObject(obj, scheme)
	if err != nil {
		h.t.Fatalf("sidecartest: finding the kind of %T: %v", obj, err)
	}
	dst, err := apiutil.GVKForObject(into, scheme)
	if err != nil {
		h.t.Fatalf("sidecartest: finding the kind of %T: %v", into, err)
	}
	obj = obj.DeepCopyObject().(client.Object)
	obj.GetObjectKind().SetGroupVersionKind(src)
	data, err := json.Marshal(obj)
	if err != nil {
		h.t.Fatalf("sidecartest: encoding %T: %v", obj, err)
	}
	resp, err := h.CallConvert(ctx, &polyopv1alpha1.ConvertRequest{
		Uid:               "sidecartest",
		DesiredApiVersion: dst.GroupVersion().String(),
		Objects:           [][]byte{data},
	})
	if err != nil {
		h.t.Fatalf("sidecartest: Convert %s to %s: %v", src, dst.GroupVersion(), err)
	}
	if e := resp.GetError(); e != "" {
		return errors.New(e)
	}
	if len(resp.GetObjects()) != 1 {
		h.t.Fatalf("sidecartest: Convert answered %d objects for 1", len(resp.GetObjects()))
	}
	if v := reflect.ValueOf(into); v.Kind() == reflect.Pointer && !v.IsNil() {
		v.Elem().SetZero()
	}
	if err := sigsjson.UnmarshalCaseSensitivePreserveInts(resp.GetObjects()[0], into); err != nil {
		h.t.Fatalf("sidecartest: decoding the converted object into %T: %v", into, err)
	}
	return nil
}

// denialOf decodes the wire's Denial.
func denialOf(d *polyopv1alpha1.Denial) *Denial {
	if d == nil {
		return nil
	}
	out := &Denial{Message: d.GetMessage()}
	for _, fe := range d.GetFieldErrors() {
		out.FieldErrors = append(out.FieldErrors, &field.Error{
			Type:     fieldErrorTypes[fe.GetType()],
			Field:    fe.GetField(),
			BadValue: badValue(fe.GetBadValue()),
			Detail:   fe.GetDetail(),
		})
	}
	return out
}

var fieldErrorTypes = map[polyopv1alpha1.FieldErrorType]field.ErrorType{
	polyopv1alpha1.FieldErrorType_FIELD_ERROR_TYPE_UNSPECIFIED:   field.ErrorTypeInvalid,
	polyopv1alpha1.FieldErrorType_FIELD_ERROR_TYPE_INVALID:       field.ErrorTypeInvalid,
	polyopv1alpha1.FieldErrorType_FIELD_ERROR_TYPE_REQUIRED:      field.ErrorTypeRequired,
	polyopv1alpha1.FieldErrorType_FIELD_ERROR_TYPE_NOT_SUPPORTED: field.ErrorTypeNotSupported,
	polyopv1alpha1.FieldErrorType_FIELD_ERROR_TYPE_FORBIDDEN:     field.ErrorTypeForbidden,
	polyopv1alpha1.FieldErrorType_FIELD_ERROR_TYPE_DUPLICATE:     field.ErrorTypeDuplicate,
	polyopv1alpha1.FieldErrorType_FIELD_ERROR_TYPE_TOO_LONG:      field.ErrorTypeTooLong,
	polyopv1alpha1.FieldErrorType_FIELD_ERROR_TYPE_TOO_MANY:      field.ErrorTypeTooMany,
	polyopv1alpha1.FieldErrorType_FIELD_ERROR_TYPE_NOT_FOUND:     field.ErrorTypeNotFound,
	polyopv1alpha1.FieldErrorType_FIELD_ERROR_TYPE_INTERNAL:      field.ErrorTypeInternal,
	polyopv1alpha1.FieldErrorType_FIELD_ERROR_TYPE_TOO_SHORT:     field.ErrorTypeTooShort,
	polyopv1alpha1.FieldErrorType_FIELD_ERROR_TYPE_TOO_FEW:       field.ErrorTypeTooFew,
	polyopv1alpha1.FieldErrorType_FIELD_ERROR_TYPE_TYPE_INVALID:  field.ErrorTypeTypeInvalid,
}

// badValue decodes a field error's bad value; empty is field.OmitValueType.
func badValue(raw []byte) any {
	if len(raw) == 0 {
		return field.OmitValueType{}
	}
	var v any
	if err := sigsjson.UnmarshalCaseSensitivePreserveInts(raw, &v); err != nil {
		return string(raw)
	}
	return v
}
