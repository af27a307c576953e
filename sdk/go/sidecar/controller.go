package sidecar

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"runtime/debug"
	"slices"
	"strings"

	"github.com/go-logr/logr"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	sigsjson "sigs.k8s.io/json"

	polyopv1alpha1 "github.com/polyop/polyop/sdk/go/gen/polyop/v1alpha1"
)

// typedController reconciles the objects of one controller, decoded into T.
type typedController[T client.Object] struct {
	name       string
	gvk        schema.GroupVersionKind
	elem       reflect.Type // the struct T points to
	status     *statusField // T's status field; nil to look it up on each object
	reconciler Reconciler[T]
	deletion   DeletionReconciler // nil unless the reconciler implements it
}

func (c *typedController[T]) reconcile(ctx context.Context, req Request, data []byte) (*polyopv1alpha1.ReconcileResponse, error) {
	log := logf.FromContext(ctx)
	if len(data) == 0 {
		if c.deletion == nil {
			log.V(1).Info("The object is gone and the reconciler does not implement DeletionReconciler; nothing to do")
			return &polyopv1alpha1.ReconcileResponse{}, nil
		}
		result, panicked, err := callSafely(log, func() (Result, error) {
			return c.deletion.ReconcileDeleted(ctx, req)
		})
		return decision(log, result, panicked, err), nil
	}

	obj, err := c.decode(data)
	if err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "controller %q: decoding %s %s: %v", c.name, req.Kind.Kind, req.NamespacedName, err)
	}
	if obj.GetName() != req.Name || obj.GetNamespace() != req.Namespace {
		return nil, status.Errorf(codes.InvalidArgument, "controller %q: the object is %s %s/%s, but the request is for %s",
			c.name, req.Kind.Kind, obj.GetNamespace(), obj.GetName(), req.NamespacedName)
	}

	events := &eventCollector{}
	ctx = context.WithValue(ctx, recorderKey{}, events)
	result, panicked, err := callSafely(log, func() (Result, error) {
		return c.reconciler.Reconcile(ctx, obj)
	})
	resp := decision(log, result, panicked, err)
	// After a panic the object is in whatever state the reconciler left it:
	// its status is not worth writing.
	if !panicked {
		st, err := c.status.encode(obj)
		if err != nil {
			log.Error(err, "Encoding the status")
			if resp.Error == nil {
				resp.Error = &polyopv1alpha1.Failure{Message: "encoding the status: " + err.Error()}
			}
		}
		resp.Status = st
	}
	resp.Events = events.collected()
	return resp, nil
}

// decode decodes the API server's JSON into a fresh T, case-sensitively as the
// API server does, and sets its apiVersion and kind if the JSON had none.
func (c *typedController[T]) decode(data []byte) (T, error) {
	obj := reflect.New(c.elem).Interface().(T)
	if err := sigsjson.UnmarshalCaseSensitivePreserveInts(data, obj); err != nil {
		var zero T
		return zero, err
	}
	if gvk := obj.GetObjectKind().GroupVersionKind(); gvk.Kind == "" || gvk.Version == "" {
		obj.GetObjectKind().SetGroupVersionKind(c.gvk)
	}
	return obj, nil
}

// callSafely calls fn, turning a panic into an error, as controller-runtime
// does with RecoverPanic.
func callSafely(log logr.Logger, fn func() (Result, error)) (result Result, panicked bool, err error) {
	defer func() {
		if r := recover(); r != nil {
			panicked = true
			err = fmt.Errorf("panic: %v [recovered]", r)
			log.Error(err, "Observed a panic in the reconciler", "stack", string(debug.Stack()))
		}
	}()
	result, err = fn()
	return result, false, err
}

// decision turns a reconciler's outcome into a response.
func decision(log logr.Logger, result Result, panicked bool, err error) *polyopv1alpha1.ReconcileResponse {
	resp := &polyopv1alpha1.ReconcileResponse{}
	if result.RequeueAfter > 0 {
		resp.RequeueAfter = durationpb.New(result.RequeueAfter)
	}
	if err == nil && result.RequeueAfter <= 0 && result.Requeue { //nolint:staticcheck // Requeue is refused, not honoured.
		err = errRequeueWithoutDelay
	}
	if err != nil {
		resp.Error = failure(err)
		if !panicked {
			// The host logs the error it receives; the sidecar logging it
			// too would show every error twice.
			log.V(1).Info("Reconciler error", "error", err.Error(), "terminal", resp.Error.GetTerminal(),
				"retryAfter", resp.Error.GetRetryAfter().AsDuration())
		}
	}
	return resp
}

// errRequeueWithoutDelay is the answer to a Result with Requeue and no
// RequeueAfter. controller-runtime deprecates Requeue and the protocol has
// no such field: the object is retried with the controller's backoff, as a
// failure, so that nothing is silently dropped and the message says what to
// return instead.
var errRequeueWithoutDelay = errors.New("the reconciler returned Result{Requeue: true}, which polyop does not support (controller-runtime deprecates it): " +
	"return Result{RequeueAfter: d} to reconcile again after d, or an error (TemporaryError to say when) to retry; retrying with backoff")

// failure is the Failure that answers err: terminal for a TerminalError, with
// retry_after for a TemporaryError with a positive delay.
func failure(err error) *polyopv1alpha1.Failure {
	terminal := errors.Is(err, reconcile.TerminalError(nil))
	f := &polyopv1alpha1.Failure{Message: errorMessage(err, terminal), Terminal: terminal}
	// Only the SDK's own TemporaryError says when: another error type with a
	// RetryAfter method does not change how the host retries.
	var temporary *temporaryError
	if !terminal && errors.As(err, &temporary) && temporary.after > 0 {
		f.RetryAfter = durationpb.New(temporary.after)
	}
	return f
}

var terminalErrorType = reflect.TypeOf(reconcile.TerminalError(nil))

// errorMessage is the message the host sees. The terminal flag already says
// that an error is terminal, so an error that is nothing but a TerminalError
// is reported by the message of the error it wraps: the host wraps it in a
// TerminalError of its own, and the log should not say "terminal error" twice.
func errorMessage(err error, terminal bool) string {
	if terminal && reflect.TypeOf(err) == terminalErrorType {
		if inner := errors.Unwrap(err); inner != nil {
			return inner.Error()
		}
	}
	return err.Error()
}

// statusField is the field of a Go type that holds the object's "status",
// found once, when the controller is built, so that each reconcile encodes the
// status alone rather than the whole object.
type statusField struct {
	index   []int
	omitted func(reflect.Value) bool // the JSON tag leaves the value out
}

// statusFieldOf finds the exported field of the struct type t whose JSON name
// is "status", or returns nil when there is none (for example for
// unstructured objects).
func statusFieldOf(t reflect.Type) *statusField {
	if t.Kind() != reflect.Struct {
		return nil
	}
	for _, f := range reflect.VisibleFields(t) {
		if !f.IsExported() || f.Anonymous {
			continue
		}
		name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name != "status" {
			continue
		}
		omitempty := slices.Contains(strings.Split(opts, ","), "omitempty")
		omitzero := slices.Contains(strings.Split(opts, ","), "omitzero")
		return &statusField{index: f.Index, omitted: func(v reflect.Value) bool {
			switch {
			case (v.Kind() == reflect.Pointer || v.Kind() == reflect.Map || v.Kind() == reflect.Slice || v.Kind() == reflect.Interface) && v.IsNil():
				return true
			case omitzero && v.IsZero():
				return true
			case omitempty && (v.Kind() == reflect.Map || v.Kind() == reflect.Slice) && v.Len() == 0:
				return true
			}
			return false
		}}
	}
	return nil
}

// encode returns the JSON of obj's status, or nil when obj has none.
func (f *statusField) encode(obj client.Object) ([]byte, error) {
	if f == nil {
		return statusOf(obj)
	}
	v := reflect.ValueOf(obj).Elem().FieldByIndex(f.index)
	if f.omitted(v) {
		return nil, nil
	}
	data, err := json.Marshal(v.Interface())
	if err != nil || string(data) == "null" {
		return nil, err
	}
	return data, nil
}

// statusOf returns the JSON of obj's top-level "status" field, or nil when it
// has none.
func statusOf(obj client.Object) ([]byte, error) {
	if u, ok := obj.(interface{ UnstructuredContent() map[string]any }); ok {
		st, found := u.UnstructuredContent()["status"]
		if !found || st == nil {
			return nil, nil
		}
		return json.Marshal(st)
	}
	data, err := json.Marshal(obj)
	if err != nil {
		return nil, err
	}
	var top struct {
		Status json.RawMessage `json:"status"`
	}
	if err := sigsjson.UnmarshalCaseSensitivePreserveInts(data, &top); err != nil {
		return nil, err
	}
	if len(top.Status) == 0 || string(top.Status) == "null" {
		return nil, nil
	}
	return top.Status, nil
}
