package client

import (
	"context"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"

	polyopv1alpha1 "github.com/polyop/polyop/sdk/go/gen/polyop/v1alpha1"
)

// EventType says what an Event reports.
type EventType string

const (
	// Added: the object appeared (or was there when the watch listed).
	Added EventType = "Added"
	// Modified: the object changed.
	Modified EventType = "Modified"
	// Deleted: the object went, or left the selection; Object is its last
	// state.
	Deleted EventType = "Deleted"
	// Synced: every object the host held when the watch listed (or
	// relisted) has been delivered; a view built from the events is
	// complete. No Object.
	Synced EventType = "Synced"
	// Error: the watch cannot go on (the host does not cache the kind, a
	// selector it refuses); Err says why, and the channel closes after it.
	Error EventType = "Error"
)

// Event is one change of a watched kind.
type Event struct {
	// Type says what happened.
	Type EventType
	// Object is the object, of the list's item type (unstructured for an
	// unstructured list); nil for Synced and Error.
	Object ctrlclient.Object
	// Err is why the watch ended, for Error.
	Err error

	// rv is the resource version of the stream message the event came
	// from, once the watch has listed: the Client's local copies wait on it.
	rv string
}

// bookmark is the type of the events that carry a BOOKMARK's version alone,
// delivered only to the Client's local copies (watcher.bookmarks), never on
// Watch's channel.
const bookmark EventType = "bookmark"

// watchRetry bounds the wait between two attempts of a watch the host ended
// (it restarted, or the client fell behind): it doubles from the first to the
// second.
var watchRetry = [2]time.Duration{100 * time.Millisecond, 5 * time.Second}

// Watch watches the objects of list's item kind through the host's Watch
// stream, selected by client.InNamespace, client.MatchingLabels (or a label
// selector) and client.MatchingFields on metadata.name or
// metadata.namespace, and delivers them on the channel it returns: first
// the objects the host holds, each Added, then Synced, then every change.
// The channel closes when ctx ends.
//
// Watch resumes by itself when the stream ends (the host restarted, or the
// receiver fell so far behind that the host cut it off): from the last
// version it delivered, or, when the host no longer remembers it, by listing
// again, delivering Added or Modified for every object and Deleted for those
// that went meanwhile, then Synced again. An error it cannot get past (the
// host does not cache the kind, a selector it refuses) is delivered as an
// Error event, and the channel closes. Read the channel promptly: the host
// holds about a thousand events for a receiver before it cuts it off.
func (c *Client) Watch(ctx context.Context, list ctrlclient.ObjectList, opts ...ctrlclient.ListOption) (<-chan Event, error) {
	listGVK, err := c.GroupVersionKindFor(list)
	if err != nil {
		return nil, err
	}
	lo := &ctrlclient.ListOptions{}
	lo.ApplyOptions(opts)
	return c.watch(ctx, listKind(listGVK), lo, nil, false), nil
}

// watch starts a Watch of gvk's objects selected by lo. resuming, when set,
// is told each time the Watch resumes after an interruption (err), from
// its last version or, with relist, by listing again.
// bookmarks delivers the stream's BOOKMARKs too, as bookmark events, and
// every event with its version.
func (c *Client) watch(ctx context.Context, gvk schema.GroupVersionKind, lo *ctrlclient.ListOptions,
	resuming func(err error, relist bool), bookmarks bool) <-chan Event {
	lr := c.listRequest(gvk, lo)
	w := &watcher{
		c: c,
		req: &polyopv1alpha1.WatchRequest{
			Kind:          lr.GetKind(),
			Namespace:     lr.GetNamespace(),
			LabelSelector: lr.GetLabelSelector(),
			FieldSelector: lr.GetFieldSelector(),
		},
		gvk:       gvk,
		out:       make(chan Event),
		known:     map[ctrlclient.ObjectKey]struct{}{},
		resuming:  resuming,
		bookmarks: bookmarks,
	}
	go w.run(ctx)
	return w.out
}

// watcher is one Watch: the stream attempts and what they delivered.
type watcher struct {
	c   *Client
	req *polyopv1alpha1.WatchRequest
	gvk schema.GroupVersionKind
	out chan Event
	// rv is the version to resume from, "" to list.
	rv string
	// known are the objects delivered and not deleted, so that a relist can
	// report those that went while the watch was away.
	known map[ctrlclient.ObjectKey]struct{}
	// resuming, when set, is told of each resumption; see Client.watch.
	resuming func(err error, relist bool)
	// bookmarks delivers the stream's BOOKMARKs as bookmark events.
	bookmarks bool
}

func (w *watcher) run(ctx context.Context) {
	defer close(w.out)
	wait := watchRetry[0]
	for ctx.Err() == nil {
		progressed, err := w.attempt(ctx)
		if ctx.Err() != nil {
			return
		}
		switch status.Code(err) {
		case codes.FailedPrecondition:
			if w.rv == "" {
				// Not an expired version: the host will not serve this watch.
				w.emit(ctx, Event{Type: Error, Err: wrapError(ctx, w.gvk, "watching "+describeList(w.gvk, w.req.GetNamespace()), err)})
				return
			}
			w.rv = "" // expired: list again
			if w.resuming != nil {
				w.resuming(err, true)
			}
			continue
		case codes.InvalidArgument, codes.NotFound, codes.PermissionDenied, codes.Unauthenticated, codes.Unimplemented:
			w.emit(ctx, Event{Type: Error, Err: wrapError(ctx, w.gvk, "watching "+describeList(w.gvk, w.req.GetNamespace()), err)})
			return
		}
		w.c.log.V(1).Info("watch ended, resuming", "kind", w.gvk.String(), "namespace", w.req.GetNamespace(), "resourceVersion", w.rv, "error", err)
		if w.resuming != nil {
			w.resuming(err, w.rv == "")
		}
		if progressed {
			wait = watchRetry[0]
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		wait = min(2*wait, watchRetry[1])
	}
}

// attempt runs one stream until it ends, and reports whether it delivered
// anything.
func (w *watcher) attempt(ctx context.Context) (progressed bool, err error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	req := w.req
	req.ResourceVersion = w.rv
	relist := w.rv == ""
	listed := map[ctrlclient.ObjectKey]struct{}{}
	stream, err := w.c.cluster.Watch(ctx, req, w.c.callOpts...)
	if err != nil {
		// No stream yet (no connection, or no address before the host has
		// announced one): try again, whatever the code.
		return false, status.Errorf(codes.Unavailable, "opening the watch: %v", err)
	}
	for {
		resp, err := stream.Recv()
		if err != nil {
			return progressed, err
		}
		progressed = true
		switch resp.GetType() {
		case polyopv1alpha1.WatchEventType_WATCH_EVENT_TYPE_BOOKMARK:
			if w.bookmarks && !relist {
				if !w.emit(ctx, Event{Type: bookmark, rv: resp.GetResourceVersion()}) {
					return progressed, ctx.Err()
				}
			}
		case polyopv1alpha1.WatchEventType_WATCH_EVENT_TYPE_INITIAL_LIST_DONE:
			if relist {
				// Whatever was known and is not in the new list went away.
				for key := range w.known {
					if _, ok := listed[key]; !ok {
						obj := w.newObject()
						obj.SetNamespace(key.Namespace)
						obj.SetName(key.Name)
						delete(w.known, key)
						if !w.emit(ctx, Event{Type: Deleted, Object: obj}) {
							return progressed, ctx.Err()
						}
					}
				}
				relist = false
			}
			if !w.emit(ctx, Event{Type: Synced, rv: resp.GetResourceVersion()}) {
				return progressed, ctx.Err()
			}
		default:
			obj := w.newObject()
			if err := decodeInto(resp.GetObject(), obj, w.gvk); err != nil {
				return progressed, status.Errorf(codes.Internal, "decoding a watched %s: %v", w.gvk.Kind, err)
			}
			key := ctrlclient.ObjectKeyFromObject(obj)
			typ := Modified
			switch resp.GetType() {
			case polyopv1alpha1.WatchEventType_WATCH_EVENT_TYPE_DELETED:
				typ = Deleted
				delete(w.known, key)
			default:
				if _, ok := w.known[key]; !ok {
					typ = Added
				}
				w.known[key] = struct{}{}
				if relist {
					listed[key] = struct{}{}
				}
			}
			ev := Event{Type: typ, Object: obj}
			if !relist {
				ev.rv = resp.GetResourceVersion()
			}
			if !w.emit(ctx, ev) {
				return progressed, ctx.Err()
			}
		}
		// While listing, an object's own version says nothing of the objects
		// still to come: a stream broken off before INITIAL_LIST_DONE lists
		// again. From the done marker on, the last version is where to resume.
		if v := resp.GetResourceVersion(); v != "" && !relist {
			w.rv = v
		}
	}
}

// emit delivers ev, unless ctx ends first.
func (w *watcher) emit(ctx context.Context, ev Event) bool {
	select {
	case w.out <- ev:
		return true
	case <-ctx.Done():
		return false
	}
}

// newObject is an empty object of the watched kind: the scheme's type, or
// unstructured.
func (w *watcher) newObject() ctrlclient.Object {
	if o, err := w.c.scheme.New(w.gvk); err == nil {
		if obj, ok := o.(ctrlclient.Object); ok {
			return obj
		}
	}
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(w.gvk)
	return u
}
