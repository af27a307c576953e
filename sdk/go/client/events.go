package client

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/grpc"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/events"

	polyopv1alpha1 "github.com/polyop/polyop/sdk/go/gen/polyop/v1alpha1"
)

// eventTimeout bounds each event an EventRecorder records.
const eventTimeout = 10 * time.Second

// RecordEvent records a Kubernetes event on obj through the host's event
// recorder. eventtype is corev1.EventTypeNormal or corev1.EventTypeWarning;
// action says what was done and defaults to the reason.
func (c *Client) RecordEvent(ctx context.Context, obj runtime.Object, eventtype, reason, action, message string) error {
	req, what, err := c.eventRequest(obj, eventtype, reason, action, message)
	if err != nil {
		return err
	}
	return c.sendEvent(ctx, req, what)
}

// eventRequest builds the request that records an event on obj, and says
// what it does for errors.
func (c *Client) eventRequest(obj runtime.Object, eventtype, reason, action, message string) (*polyopv1alpha1.RecordEventRequest, string, error) {
	gvk, err := c.GroupVersionKindFor(obj)
	if err != nil {
		return nil, "", err
	}
	m, err := meta.Accessor(obj)
	if err != nil {
		return nil, "", fmt.Errorf("polyop client: recording an event on %T: %w", obj, err)
	}
	req := &polyopv1alpha1.RecordEventRequest{
		Kind: gvkProto(gvk),
		Key:  keyProto(m.GetNamespace(), m.GetName()),
		Event: &polyopv1alpha1.Event{
			Type:    eventTypeOf(eventtype),
			Reason:  reason,
			Message: message,
			Action:  action,
		},
	}
	return req, fmt.Sprintf("recording event %s on %s", reason, describe(gvk, m.GetNamespace(), m.GetName())), nil
}

func (c *Client) sendEvent(ctx context.Context, req *polyopv1alpha1.RecordEventRequest, what string) error {
	return c.call(ctx, schema.GroupVersionKind{}, func() string { return what },
		func(ctx context.Context, callOpts ...grpc.CallOption) error {
			_, err := c.cluster.RecordEvent(ctx, req, callOpts...)
			return err
		})
}

func eventTypeOf(t string) polyopv1alpha1.EventType {
	switch t {
	case corev1.EventTypeNormal:
		return polyopv1alpha1.EventType_EVENT_TYPE_NORMAL
	case corev1.EventTypeWarning:
		return polyopv1alpha1.EventType_EVENT_TYPE_WARNING
	default:
		return polyopv1alpha1.EventType_EVENT_TYPE_UNSPECIFIED
	}
}

// NewEventRecorder returns an events.EventRecorder (the one
// controller-runtime's manager.GetEventRecorder returns) that records its
// events through c.
//
// Unlike client-go's recorders, Eventf waits for the host to take the event,
// at most eventTimeout (10 seconds): the host reads the object to record an
// event on it, so an event recorded right before the object goes (the last
// step of a finalizer, say) must reach the host first. An event that cannot
// be recorded is logged and dropped. The related object is not sent: the
// Cluster service records an event on one object.
func NewEventRecorder(c *Client) events.EventRecorder {
	return &eventRecorder{client: c}
}

type eventRecorder struct {
	client *Client
}

func (r *eventRecorder) Eventf(regarding, _ runtime.Object, eventtype, reason, action, note string, args ...any) {
	message := note
	if len(args) > 0 {
		message = fmt.Sprintf(note, args...)
	}
	ctx, cancel := context.WithTimeout(context.Background(), eventTimeout)
	defer cancel()
	if err := r.client.RecordEvent(ctx, regarding, eventtype, reason, action, message); err != nil {
		r.client.log.Error(err, "Dropping an event", "reason", reason, "message", message)
	}
}
