package sidecar

import (
	"context"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"

	polyopv1alpha1 "github.com/polyop/polyop/sdk/go/gen/polyop/v1alpha1"
)

// EventRecorder records Kubernetes events on the object being reconciled. The
// events travel back to the host in the reconcile's response and the host
// records them, in order, through its own event recorder. Events recorded for
// an object that no longer exists are dropped.
//
// An event is its type, its reason and its message, in that order, then its
// optional fields, as in the Python and TypeScript SDKs. eventtype is
// corev1.EventTypeNormal ("Normal") or corev1.EventTypeWarning ("Warning");
// the host records any other value as Normal. reason is a short CamelCase
// word, for example "Scaled".
type EventRecorder interface {
	// Event records an event. Its action (the events.k8s.io/v1 field saying
	// what was done, for example "Scaling") is the reason unless WithAction
	// says otherwise.
	Event(eventtype, reason, message string, opts ...EventOption)
	// Eventf is Event with a message formatted by fmt.Sprintf.
	Eventf(eventtype, reason, messageFmt string, args ...any)
	// EventWithAction records an event with an explicit action.
	//
	// Deprecated: use Event(eventtype, reason, message, WithAction(action)),
	// which takes the message before the action, as every SDK does.
	EventWithAction(eventtype, reason, action, message string)
}

// EventOption sets an optional field of an event recorded with
// EventRecorder.Event.
type EventOption interface {
	applyToEvent(*polyopv1alpha1.Event)
}

type eventOptionFunc func(*polyopv1alpha1.Event)

func (f eventOptionFunc) applyToEvent(e *polyopv1alpha1.Event) { f(e) }

// WithAction sets an event's action, the events.k8s.io/v1 field saying what
// was done, for example "Scaling". Defaults to the event's reason.
func WithAction(action string) EventOption {
	return eventOptionFunc(func(e *polyopv1alpha1.Event) { e.Action = action })
}

type recorderKey struct{}

// Recorder returns the EventRecorder of the reconcile ctx belongs to. Outside a
// reconcile it returns a recorder that drops every event.
func Recorder(ctx context.Context) EventRecorder {
	if r, ok := ctx.Value(recorderKey{}).(*eventCollector); ok {
		return r
	}
	return discardRecorder{}
}

// eventCollector collects the events of one reconcile. It is safe for
// concurrent use, for reconcilers that fan out into goroutines.
type eventCollector struct {
	mu     sync.Mutex
	events []*polyopv1alpha1.Event
}

func (c *eventCollector) Event(eventtype, reason, message string, opts ...EventOption) {
	e := &polyopv1alpha1.Event{Type: eventType(eventtype), Reason: reason, Message: message}
	for _, opt := range opts {
		opt.applyToEvent(e)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.events = append(c.events, e)
}

func (c *eventCollector) Eventf(eventtype, reason, messageFmt string, args ...any) {
	c.Event(eventtype, reason, fmt.Sprintf(messageFmt, args...))
}

func (c *eventCollector) EventWithAction(eventtype, reason, action, message string) {
	c.Event(eventtype, reason, message, WithAction(action))
}

func (c *eventCollector) collected() []*polyopv1alpha1.Event {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.events
}

func eventType(t string) polyopv1alpha1.EventType {
	switch t {
	case corev1.EventTypeNormal:
		return polyopv1alpha1.EventType_EVENT_TYPE_NORMAL
	case corev1.EventTypeWarning:
		return polyopv1alpha1.EventType_EVENT_TYPE_WARNING
	default:
		return polyopv1alpha1.EventType_EVENT_TYPE_UNSPECIFIED
	}
}

type discardRecorder struct{}

func (discardRecorder) Event(string, string, string, ...EventOption)   {}
func (discardRecorder) Eventf(string, string, string, ...any)          {}
func (discardRecorder) EventWithAction(string, string, string, string) {}
