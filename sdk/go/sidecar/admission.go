package sidecar

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"runtime/debug"

	jsonpatch "github.com/evanphx/json-patch/v5"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
	sigsjson "sigs.k8s.io/json"

	polyopv1alpha1 "github.com/polyop/polyop/sdk/go/gen/polyop/v1alpha1"
)

// Defaulter sets defaults on an object of type T before the API server stores
// it: a mutating admission webhook. It is controller-runtime's own
// admission.Defaulter, so a defaulter written for a kubebuilder project works
// here unchanged.
//
// Default changes obj in place; the host sends the API server a JSON patch
// from the object it received to the changed one, leaving alone the fields
// the Go type does not know. An error refuses the request (see Validator for
// how errors are reported).
type Defaulter[T runtime.Object] = admission.Defaulter[T]

// Validator accepts or refuses the creation, update or deletion of an object
// of type T: a validating admission webhook. It is controller-runtime's own
// admission.Validator.
//
// An error refuses the request, as in controller-runtime. One built by
// apierrors.NewInvalid from a field.ErrorList
// (k8s.io/apimachinery/pkg/util/validation/field) reaches the client as a 422
// Invalid with one cause per field error, the way the API server's own
// validation reports it; another API status error (apierrors.NewConflict,
// NewBadRequest, ...) with its own code and reason; any other error as a 403
// Forbidden with its message.
// Warnings reach the client either way (kubectl prints them).
//
// ValidateDelete is called only when the webhook admits deletes
// (WithOperations(Create, Update, Delete)).
type Validator[T runtime.Object] = admission.Validator[T]

// Warnings are messages returned to the client with the answer.
type Warnings = admission.Warnings

// DefaulterFunc adapts a function to a Defaulter.
type DefaulterFunc[T runtime.Object] func(ctx context.Context, obj T) error

// Default calls f(ctx, obj).
func (f DefaulterFunc[T]) Default(ctx context.Context, obj T) error { return f(ctx, obj) }

// Inside Default, ValidateCreate, ValidateUpdate and ValidateDelete,
// admission.RequestFromContext(ctx) (sigs.k8s.io/controller-runtime/pkg/webhook/admission)
// returns the admission request as the API server sent it to the host: the
// operation, the user, DryRun, and the objects' raw JSON. A request with
// DryRun set must change nothing outside the answer. log.FromContext(ctx)
// gives a logger with the kind, namespace, name and operation.

// Default answers the host's mutating admission call: it decodes the object
// into the registered type, calls its Defaulter and answers with the
// defaulted object.
//
// It answers gRPC NOT_FOUND for a kind without a webhook, UNIMPLEMENTED for a
// kind without a Defaulter, INVALID_ARGUMENT for an object that does not
// decode, INTERNAL for a Defaulter that panics, and DEADLINE_EXCEEDED (or
// CANCELLED) for a Defaulter that returns an error after the call's deadline
// passed (or the host canceled it); the host reports those as failures of the
// webhook (and applies its failure policy). Any other error from the
// Defaulter is a denial.
func (s *service) Default(ctx context.Context, in *polyopv1alpha1.DefaultRequest) (*polyopv1alpha1.DefaultResponse, error) {
	wh, err := s.webhookFor(in.GetRequest())
	if err != nil {
		return nil, err
	}
	if wh.defaultFn == nil {
		return nil, status.Errorf(codes.Unimplemented, "sidecar %q has no defaulter for %s", s.opts.Name, wh.gvk)
	}
	ctx = s.admissionContext(ctx, "default", in.GetRequest())
	return wh.defaultFn(ctx, in.GetRequest())
}

// Validate answers the host's validating admission call: it decodes the
// object (and, on update, the old object; on delete, the object being
// deleted) into the registered type and calls its Validator.
//
// gRPC errors are as for Default.
func (s *service) Validate(ctx context.Context, in *polyopv1alpha1.ValidateRequest) (*polyopv1alpha1.ValidateResponse, error) {
	wh, err := s.webhookFor(in.GetRequest())
	if err != nil {
		return nil, err
	}
	if wh.validateFn == nil {
		return nil, status.Errorf(codes.Unimplemented, "sidecar %q has no validator for %s", s.opts.Name, wh.gvk)
	}
	ctx = s.admissionContext(ctx, "validate", in.GetRequest())
	return wh.validateFn(ctx, in.GetRequest())
}

// webhookFor finds the webhook of the request's kind.
func (s *Server) webhookFor(req *polyopv1alpha1.AdmissionRequest) (*webhookRegistration, error) {
	k := req.GetKind()
	gvk := schema.GroupVersionKind{Group: k.GetGroup(), Version: k.GetVersion(), Kind: k.GetKind()}
	s.mu.RLock()
	wh, ok := s.admission.webhooks[gvk]
	s.mu.RUnlock()
	if !ok {
		return nil, status.Errorf(codes.NotFound, "sidecar %q has no webhook for %s", s.opts.Name, gvk)
	}
	return wh, nil
}

// admissionContext gives ctx the admission request, as controller-runtime's
// admission.RequestFromContext returns it, and a logger.
func (s *Server) admissionContext(ctx context.Context, webhook string, in *polyopv1alpha1.AdmissionRequest) context.Context {
	req := admissionRequestOf(in)
	log := s.log.WithValues("webhook", webhook, "kind", req.Kind.Kind, "namespace", req.Namespace, "name", req.Name, "operation", req.Operation)
	if in.GetDryRun() {
		log = log.WithValues("dryRun", true)
	}
	ctx = withCallLogger(ctx, log)
	return admission.NewContextWithRequest(ctx, req)
}

// admissionRequestOf rebuilds the API server's AdmissionRequest from the
// host's.
func admissionRequestOf(in *polyopv1alpha1.AdmissionRequest) admission.Request {
	dryRun := in.GetDryRun()
	req := admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
		UID:         types.UID(in.GetUid()),
		Kind:        metav1.GroupVersionKind{Group: in.GetKind().GetGroup(), Version: in.GetKind().GetVersion(), Kind: in.GetKind().GetKind()},
		Resource:    metav1.GroupVersionResource{Group: in.GetKind().GetGroup(), Version: in.GetKind().GetVersion(), Resource: in.GetResource()},
		SubResource: in.GetSubresource(),
		Name:        in.GetKey().GetName(),
		Namespace:   in.GetKey().GetNamespace(),
		Operation:   admissionOperations[in.GetOperation()],
		UserInfo: authenticationv1.UserInfo{
			Username: in.GetUserInfo().GetUsername(),
			UID:      in.GetUserInfo().GetUid(),
			Groups:   in.GetUserInfo().GetGroups(),
		},
		Object:    runtime.RawExtension{Raw: in.GetObject()},
		OldObject: runtime.RawExtension{Raw: in.GetOldObject()},
		DryRun:    &dryRun,
	}}
	if extra := in.GetUserInfo().GetExtra(); len(extra) > 0 {
		req.UserInfo.Extra = make(map[string]authenticationv1.ExtraValue, len(extra))
		for k, v := range extra {
			req.UserInfo.Extra[k] = v.GetValues()
		}
	}
	return req
}

var admissionOperations = map[polyopv1alpha1.Operation]admissionv1.Operation{
	polyopv1alpha1.Operation_OPERATION_CREATE:  admissionv1.Create,
	polyopv1alpha1.Operation_OPERATION_UPDATE:  admissionv1.Update,
	polyopv1alpha1.Operation_OPERATION_DELETE:  admissionv1.Delete,
	polyopv1alpha1.Operation_OPERATION_CONNECT: admissionv1.Connect,
}

// typedWebhook is the admission of objects of type T.
type typedWebhook[T client.Object] struct {
	gvk       schema.GroupVersionKind
	elem      reflect.Type
	defaulter Defaulter[T]
	validator Validator[T]
}

func (w *typedWebhook[T]) defaultObject(ctx context.Context, in *polyopv1alpha1.AdmissionRequest) (*polyopv1alpha1.DefaultResponse, error) {
	switch in.GetOperation() {
	case polyopv1alpha1.Operation_OPERATION_DELETE, polyopv1alpha1.Operation_OPERATION_CONNECT:
		// Nothing to default, as in controller-runtime.
		return &polyopv1alpha1.DefaultResponse{}, nil
	}
	obj, err := w.decode(in.GetObject(), "object")
	if err != nil {
		return nil, err
	}
	original := obj.DeepCopyObject().(T)
	denial, failed := callAdmission(ctx, func() error { return w.defaulter.Default(ctx, obj) })
	if failed != nil {
		return nil, failed
	}
	if denial != nil {
		return &polyopv1alpha1.DefaultResponse{Denied: denialOf(denial)}, nil
	}
	if reflect.DeepEqual(original, obj) {
		return &polyopv1alpha1.DefaultResponse{}, nil
	}
	defaulted, err := applyChanges(in.GetObject(), original, obj)
	if err != nil {
		return nil, status.Errorf(codes.Internal, "encoding the defaulted %s: %v", w.gvk.Kind, err)
	}
	return &polyopv1alpha1.DefaultResponse{Object: defaulted}, nil
}

func (w *typedWebhook[T]) validate(ctx context.Context, in *polyopv1alpha1.AdmissionRequest) (*polyopv1alpha1.ValidateResponse, error) {
	var call func() (Warnings, error)
	switch in.GetOperation() {
	case polyopv1alpha1.Operation_OPERATION_CREATE:
		obj, err := w.decode(in.GetObject(), "object")
		if err != nil {
			return nil, err
		}
		call = func() (Warnings, error) { return w.validator.ValidateCreate(ctx, obj) }
	case polyopv1alpha1.Operation_OPERATION_UPDATE:
		obj, err := w.decode(in.GetObject(), "object")
		if err != nil {
			return nil, err
		}
		old, err := w.decode(in.GetOldObject(), "old object")
		if err != nil {
			return nil, err
		}
		call = func() (Warnings, error) { return w.validator.ValidateUpdate(ctx, old, obj) }
	case polyopv1alpha1.Operation_OPERATION_DELETE:
		// The API server sends the object being deleted as the old object.
		old, err := w.decode(in.GetOldObject(), "old object")
		if err != nil {
			return nil, err
		}
		call = func() (Warnings, error) { return w.validator.ValidateDelete(ctx, old) }
	case polyopv1alpha1.Operation_OPERATION_CONNECT:
		// Not validated, as in controller-runtime.
		return &polyopv1alpha1.ValidateResponse{}, nil
	default:
		return nil, status.Errorf(codes.InvalidArgument, "unknown operation %v", in.GetOperation())
	}
	var warnings Warnings
	denial, failed := callAdmission(ctx, func() error {
		var err error
		warnings, err = call()
		return err
	})
	if failed != nil {
		return nil, failed
	}
	resp := &polyopv1alpha1.ValidateResponse{Warnings: warnings}
	if denial != nil {
		resp.Denied = denialOf(denial)
	}
	return resp, nil
}

// decode decodes the API server's JSON into a fresh T, case-sensitively as the
// API server does.
func (w *typedWebhook[T]) decode(data []byte, what string) (T, error) {
	var zero T
	if len(data) == 0 {
		return zero, status.Errorf(codes.InvalidArgument, "the request carries no %s", what)
	}
	obj := reflect.New(w.elem).Interface().(T)
	if err := decodeJSON(data, obj); err != nil {
		return zero, status.Errorf(codes.InvalidArgument, "decoding the %s as %s: %v", what, w.gvk.Kind, err)
	}
	if gvk := obj.GetObjectKind().GroupVersionKind(); gvk.Kind == "" || gvk.Version == "" {
		obj.GetObjectKind().SetGroupVersionKind(w.gvk)
	}
	return obj, nil
}

// callAdmission calls fn and sorts out how the call ended. fn's error is a
// denial, as in controller-runtime. The call failed instead, with a gRPC
// error the host reports as a failing webhook, when fn panicked (INTERNAL, as
// controller-runtime answers a panicking webhook with a 500) or when fn
// returned an error after the call's context ended (DEADLINE_EXCEEDED or
// CANCELLED): an error such as "context deadline exceeded" says the handler
// was cut off, not that the object is refused, and the host reports it as
// the sidecar not answering in time.
func callAdmission(ctx context.Context, fn func() error) (denial, failed error) {
	defer func() {
		if r := recover(); r != nil {
			logf.FromContext(ctx).Error(fmt.Errorf("%v", r), "Observed a panic in the webhook", "stack", string(debug.Stack()))
			denial, failed = nil, status.Errorf(codes.Internal, "panic: %v [recovered]", r)
		}
	}()
	err := fn()
	if err != nil && ctx.Err() != nil {
		return nil, status.FromContextError(ctx.Err()).Err()
	}
	return err, nil
}

// applyChanges applies to raw, the object the API server sent, the changes
// the defaulter made (from before to after, both of the Go type), and
// returns the result: a three-way merge, as the JSON merge patch (RFC 7386)
// from before to after applied to raw. Fields the Go type does not know, and
// fields it leaves out when empty, stay as the API server sent them: only
// what the defaulter changed changes, as controller-runtime's defaulter drops
// the removals its scheme caused. Members the merge does not touch keep
// their order and their JSON as sent (integers keep every digit); members it
// adds come after them. A list the defaulter changes is replaced whole, and
// a field it sets to null is removed, as a merge patch does.
func applyChanges(raw []byte, before, after runtime.Object) ([]byte, error) {
	b, err := json.Marshal(before)
	if err != nil {
		return nil, err
	}
	a, err := json.Marshal(after)
	if err != nil {
		return nil, err
	}
	if bytes.Equal(a, b) {
		return raw, nil
	}
	patch, err := jsonpatch.CreateMergePatch(b, a)
	if err != nil {
		return nil, err
	}
	return jsonpatch.MergePatch(raw, patch)
}

// decodeJSON decodes the API server's JSON into obj, case-sensitively as the
// API server does, keeping integers integers.
func decodeJSON(data []byte, obj any) error {
	return sigsjson.UnmarshalCaseSensitivePreserveInts(data, obj)
}
