package sidecar

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	polyopv1alpha1 "github.com/polyop/polyop/sdk/go/gen/polyop/v1alpha1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// One object is in flight once across the hop. A call on a ReconcileStream
// whose deadline passes is not cancelled: the sidecar cancels its handler at
// that deadline (ReconcileStreamRequest.timeout) and answers once the
// handler has returned, which a handler that ignores cancellation (Python's
// synchronous handlers cannot be cancelled) may do much later. Until that
// answer arrives, the host holds the object: it makes no other call for it,
// so that the sidecar never runs two calls of one object at once, as
// controller-runtime never runs two reconciles of one object at once. The
// late answer is discarded, and the object released: the controller that
// registered with OnRelease requeues it then.
//
// A sidecar that has not answered a grace period after the deadline (the
// reconcile timeout again) has its stream cancelled, as gRPC cancels a unary
// call at its deadline, and the object is released. A unary call is never
// held: gRPC's cancellation reaches the handler at the deadline, and the host
// cannot know when the handler returns.

// objectKey names an object of a controller: what the host holds.
type objectKey struct {
	controller, namespace, name string
}

// callTarget is what a Reconcile and a Finalize request both tell of their
// object.
type callTarget interface {
	GetController() string
	GetKind() *polyopv1alpha1.GroupVersionKind
	GetKey() *polyopv1alpha1.ObjectKey
}

func keyOf(req callTarget) objectKey {
	return objectKey{controller: req.GetController(), namespace: req.GetKey().GetNamespace(), name: req.GetKey().GetName()}
}

// describeObject names req's object for an error: its kind and its
// namespace/name (or name).
func describeObject(req callTarget) string {
	object := req.GetKey().GetName()
	if ns := req.GetKey().GetNamespace(); ns != "" {
		object = ns + "/" + object
	}
	if kind := req.GetKind().GetKind(); kind != "" {
		return kind + " " + object
	}
	return object
}

// heldObjects are the objects whose call outlived its deadline and which the
// sidecar may still be working on: at most one entry per object, since no
// other call of a held object is made.
type heldObjects struct {
	mu        sync.Mutex
	held      map[objectKey]struct{}
	onRelease map[string]func(namespace, name string)
}

// holds reports whether key is held.
func (h *heldObjects) holds(key objectKey) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	_, ok := h.held[key]
	return ok
}

func (h *heldObjects) hold(key objectKey) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.held == nil {
		h.held = map[objectKey]struct{}{}
	}
	h.held[key] = struct{}{}
	callsHeld.WithLabelValues(key.controller).Inc()
}

// release lets key go and tells its controller.
func (h *heldObjects) release(key objectKey) {
	h.mu.Lock()
	delete(h.held, key)
	notify := h.onRelease[key.controller]
	h.mu.Unlock()
	callsHeld.WithLabelValues(key.controller).Dec()
	if notify != nil {
		notify(key.namespace, key.name)
	}
}

func (h *heldObjects) setOnRelease(controller string, f func(namespace, name string)) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.onRelease == nil {
		h.onRelease = map[string]func(namespace, name string){}
	}
	h.onRelease[controller] = f
}

// OnRelease makes the client call f with an object of controller when it
// releases it: the late answer to its last call arrived (and was discarded),
// its stream ended, or the grace period after the call's deadline passed.
// Until then every Reconcile and Finalize call for the object fails with an
// *InFlightError, without reaching the sidecar. f must not block: it runs on
// the goroutine that read the late answer. One f per controller; a later
// one replaces it.
func (c *Client) OnRelease(controller string, f func(namespace, name string)) {
	c.streams.held.setOnRelease(controller, f)
}

// InFlightError is a call the host did not make: the sidecar may still be
// working on the object's last call, whose deadline passed without an answer.
// The object is released, and its controller told (see Client.OnRelease),
// when that answer arrives.
type InFlightError struct {
	// Method is the call not made: "Reconcile" or "Finalize".
	Method string
	// Controller is the controller the call was for.
	Controller string
	// Object is the object's kind and key, as "MaintenanceWindow ns/name".
	Object string
	// Namespace and Name are the object's key.
	Namespace, Name string
}

func (e *InFlightError) Error() string {
	return fmt.Sprintf("controller %q: no %s call for %s: the sidecar may still be running its last call, which outlived its deadline, and the host waits for its answer",
		e.Controller, e.Method, e.Object)
}

// GRPCStatus makes the error count as a call that did not start.
func (e *InFlightError) GRPCStatus() *status.Status {
	return status.New(codes.Aborted, e.Error())
}

// IsInFlight reports whether err is, or wraps, an *InFlightError.
func IsInFlight(err error) bool {
	var e *InFlightError
	return errors.As(err, &e)
}

// inFlight is the error of a call for a held object, or nil.
func (c *Client) inFlight(method string, req callTarget) error {
	if !c.streams.held.holds(keyOf(req)) {
		return nil
	}
	return &InFlightError{
		Method: method, Controller: req.GetController(), Object: describeObject(req),
		Namespace: req.GetKey().GetNamespace(), Name: req.GetKey().GetName(),
	}
}

// DeadlineError is a Reconcile or Finalize call the sidecar did not answer
// within its deadline: that object's failure, which says nothing about the
// sidecar's other calls. It has the status DEADLINE_EXCEEDED.
type DeadlineError struct {
	// Method is the call: "Reconcile" or "Finalize".
	Method string
	// Controller is the controller the call was for.
	Controller string
	// Object is the object's kind and key, as "MaintenanceWindow ns/name".
	Object string
	// Timeout is the call's deadline, from its start.
	Timeout time.Duration
	// Held tells whether the host holds the object until the sidecar answers
	// (a call on a stream), at most Grace longer.
	Held  bool
	Grace time.Duration
}

func (e *DeadlineError) Error() string {
	msg := fmt.Sprintf("controller %q: the sidecar did not answer the %s call for %s within its deadline (%s)",
		e.Controller, e.Method, e.Object, e.Timeout.Round(time.Millisecond))
	if e.Held {
		msg += fmt.Sprintf("; no other call for it is made until the sidecar answers this one, or for %s at most", e.Grace)
	}
	return msg
}

// GRPCStatus is DEADLINE_EXCEEDED, what the unary call would have ended with.
func (e *DeadlineError) GRPCStatus() *status.Status {
	return status.New(codes.DeadlineExceeded, e.Error())
}

// answeredError is a CallStatus the sidecar answered on a stream: a gRPC
// status as the unary call would have ended with, but one the sidecar sent,
// so it tells nothing about its connection (see IsUnavailable).
type answeredError struct{ error }

func (e *answeredError) Unwrap() error { return e.error }

// GRPCStatus is the answered status itself, so that the error reads as the
// unary call's.
func (e *answeredError) GRPCStatus() *status.Status { return status.Convert(e.error) }

// callsHeld and heldCallsCancelled are the metrics of held objects.
var (
	callsHeld = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "polyop_sidecar_calls_held",
		Help: "Reconcile and Finalize calls past their deadline whose answer the polyop host still waits for, by controller: " +
			"the host makes no other call for their objects meanwhile.",
	}, []string{"controller"})
	heldCallsCancelled = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "polyop_sidecar_held_calls_cancelled_total",
		Help: "Calls past their deadline the sidecar did not answer within the grace period after it, by controller: " +
			"the polyop host cancelled their streams and released their objects.",
	}, []string{"controller"})
)

func init() {
	metrics.Registry.MustRegister(callsHeld, heldCallsCancelled)
}
