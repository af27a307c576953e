package sidecartest

import (
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	polyopv1alpha1 "github.com/polyop/polyop/sdk/go/gen/polyop/v1alpha1"
	"github.com/polyop/polyop/sdk/go/sidecar"
)

// Response is a Server's answer to one reconcile, in the terms a test checks.
type Response struct {
	// Result is the requeue decision: RequeueAfter.
	Result sidecar.Result
	// Err is the reconciler's error; nil when the reconcile succeeded.
	Err *Error
	// Events are the events the reconciler recorded, in order.
	Events []Event
	// Raw is the response as it crossed the wire.
	Raw *polyopv1alpha1.ReconcileResponse

	t      testing.TB
	object []byte // the request's object; empty for a deletion
}

// Error is a failed reconcile.
type Error struct {
	// Message is the error's message.
	Message string
	// Terminal is true for a sidecar.TerminalError: the host does not retry.
	Terminal bool
	// RetryAfter is the delay of a sidecar.TemporaryError: the host retries
	// after it instead of its backoff. Zero otherwise.
	RetryAfter time.Duration
}

func errorOf(f *polyopv1alpha1.Failure) *Error {
	if f == nil {
		return nil
	}
	return &Error{Message: f.GetMessage(), Terminal: f.GetTerminal(), RetryAfter: f.GetRetryAfter().AsDuration()}
}

// Event is an event the reconciler recorded.
type Event struct {
	// Type is "Normal" or "Warning", or "" when the reconciler gave another
	// value (the host records those as Normal).
	Type string
	// Reason is the event's reason.
	Reason string
	// Message is the event's message.
	Message string
	// Action is the event's action; "" when the reconciler gave none (the host
	// uses the reason).
	Action string
}

func newResponse(t testing.TB, object []byte, raw *polyopv1alpha1.ReconcileResponse) *Response {
	r := &Response{Raw: raw, t: t, object: object}
	r.Result.RequeueAfter = raw.GetRequeueAfter().AsDuration()
	r.Err = errorOf(raw.GetError())
	for _, e := range raw.GetEvents() {
		r.Events = append(r.Events, Event{
			Type:    eventType(e.GetType()),
			Reason:  e.GetReason(),
			Message: e.GetMessage(),
			Action:  e.GetAction(),
		})
	}
	return r
}

func eventType(t polyopv1alpha1.EventType) string {
	switch t {
	case polyopv1alpha1.EventType_EVENT_TYPE_NORMAL:
		return "Normal"
	case polyopv1alpha1.EventType_EVENT_TYPE_WARNING:
		return "Warning"
	default:
		return ""
	}
}

// HasStatus reports whether the response carries a status for the host to
// write.
func (r *Response) HasStatus() bool {
	return len(r.Raw.GetStatus()) > 0
}

// Status decodes into into the reconciled object as the host would leave it:
// the object the request carried, with the status from the response (or its
// own status, when the response carries none). into is reset first.
func (r *Response) Status(into client.Object) {
	r.t.Helper()
	if len(r.object) == 0 {
		r.t.Fatal("sidecartest: the request carried no object (a deletion): there is no status")
	}
	if err := statusInto(r.object, r.Raw.GetStatus(), into); err != nil {
		r.t.Fatalf("sidecartest: applying the status to %T: %v", into, err)
	}
}
