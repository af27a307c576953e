package cluster

import (
	"context"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"

	"k8s.io/apimachinery/pkg/runtime/schema"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/polyop/polyop/internal/object"
	polyopv1alpha1 "github.com/polyop/polyop/sdk/go/gen/polyop/v1alpha1"
)

// watchEvent is one change of a kind, as the host's informer delivered it.
type watchEvent struct {
	typ polyopv1alpha1.WatchEventType
	obj client.Object
	// prev is the object's state before a MODIFIED, nil if the hub had none.
	prev client.Object
	rv   uint64
}

// hub fans the events of one kind's informer out to the Watch streams of that
// kind. It registers one event handler on the informer, the first time a
// stream watches the kind, and keeps it until the host stops: it holds the
// objects the informer delivered (pointers to the cache's own objects, no
// copies), so that a stream's initial list agrees exactly with the events that
// follow it, and the last Options.WatchHistory events, so that a stream can
// resume after a recent resource version.
//
// Resource versions are compared as numbers, as the API server's own watch
// cache compares them: etcd's revisions, which grow with every write.
type hub struct {
	gvk     schema.GroupVersionKind
	history int

	mu      sync.Mutex
	objects map[client.ObjectKey]client.Object
	// events are the last changes, oldest first; every change after since is
	// among them.
	events []watchEvent
	since  uint64
	// latest is the resource version of the newest change delivered, or of
	// the informer's list when none came since.
	latest uint64
	subs   map[*subscriber]struct{}
	// advanced, when a caller of barrier waits, is closed (and cleared) the
	// next time latest grows.
	advanced chan struct{}
}

// subscriber is one Watch stream's side of a hub.
type subscriber struct {
	match func(client.Object) bool
	// ch holds the events waiting to be sent, at most Options.WatchBuffer.
	ch chan watchEvent
	// overflowed is closed when ch was full, which ends the stream.
	overflowed chan struct{}
	// skipUpTo drops changes at or below this resource version: the stream
	// has them already.
	skipUpTo uint64
	// queued is the resource version of the last message queued for the
	// stream (an event, a bookmark, or the version its initial list or
	// resume is current at): the stream will have delivered every selected
	// change up to it once it has sent what ch holds.
	queued uint64
}

// hubFor returns the hub of gvk, registering it on the kind's informer and
// waiting for the informer's current objects the first time.
func (s *Server) hubFor(ctx context.Context, gvk schema.GroupVersionKind) (*hub, error) {
	s.hubsMu.Lock()
	defer s.hubsMu.Unlock()
	if h, ok := s.hubs[gvk]; ok {
		return h, nil
	}
	inf, err := s.clients.Informers.GetInformer(ctx, object.New(gvk))
	if err != nil {
		return nil, toStatus(err)
	}
	h := &hub{
		gvk:     gvk,
		history: s.opts.WatchHistory,
		objects: map[client.ObjectKey]client.Object{},
		subs:    map[*subscriber]struct{}{},
	}
	reg, err := inf.AddEventHandler(h)
	if err != nil {
		return nil, toStatus(err)
	}
	select {
	case <-reg.HasSyncedChecker().Done():
	case <-ctx.Done():
		_ = inf.RemoveEventHandler(reg)
		return nil, toStatus(ctx.Err())
	}
	h.mu.Lock()
	// The informer's list may be newer than every object in it (a delete
	// leaves no object behind): changes up to its version are all known.
	if v, ok := inf.(interface{ LastSyncResourceVersion() string }); ok {
		if rv, err := strconv.ParseUint(v.LastSyncResourceVersion(), 10, 64); err == nil && rv > h.latest {
			h.latest = rv
		}
	}
	h.since = h.latest
	h.mu.Unlock()
	s.hubs[gvk] = h
	list := append(s.hubsCopy(), h)
	s.hubList.Store(&list)
	return h, nil
}

// OnAdd implements toolscache.ResourceEventHandler.
func (h *hub) OnAdd(obj any, _ bool) {
	h.record(polyopv1alpha1.WatchEventType_WATCH_EVENT_TYPE_ADDED, obj)
}

// OnUpdate implements toolscache.ResourceEventHandler.
func (h *hub) OnUpdate(_, obj any) {
	h.record(polyopv1alpha1.WatchEventType_WATCH_EVENT_TYPE_MODIFIED, obj)
}

// OnDelete implements toolscache.ResourceEventHandler.
func (h *hub) OnDelete(obj any) {
	if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	h.record(polyopv1alpha1.WatchEventType_WATCH_EVENT_TYPE_DELETED, obj)
}

// record applies one change to the hub's objects, remembers it and hands it
// to every stream that selects it, without ever blocking the informer: a
// stream whose buffer is full is marked overflowed and ends.
func (h *hub) record(typ polyopv1alpha1.WatchEventType, raw any) {
	obj, ok := raw.(client.Object)
	if !ok {
		return
	}
	if hook := testHookBeforeRecord.Load(); hook != nil {
		(*hook)(h.gvk)
	}
	rv, _ := strconv.ParseUint(obj.GetResourceVersion(), 10, 64)
	key := client.ObjectKeyFromObject(obj)
	h.mu.Lock()
	defer h.mu.Unlock()
	prev := h.objects[key]
	if typ == polyopv1alpha1.WatchEventType_WATCH_EVENT_TYPE_DELETED {
		delete(h.objects, key)
	} else {
		h.objects[key] = obj
	}
	if rv > h.latest {
		h.latest = rv
		if h.advanced != nil {
			close(h.advanced)
			h.advanced = nil
		}
	}
	ev := watchEvent{typ: typ, obj: obj, prev: prev, rv: rv}
	if len(h.events) >= h.history && h.history > 0 {
		h.since = max(h.since, h.events[0].rv)
		h.events = h.events[1:]
	}
	if h.history > 0 {
		h.events = append(h.events, ev)
	} else {
		h.since = h.latest
	}
	for sub := range h.subs {
		if rv != 0 && rv <= sub.skipUpTo {
			continue
		}
		ev, ok := sub.selected(ev)
		if !ok {
			continue
		}
		h.queue(sub, ev)
	}
}

// queue hands ev to sub, or, when sub's buffer is full, marks it overflowed
// and drops it. h.mu is held.
func (h *hub) queue(sub *subscriber, ev watchEvent) {
	select {
	case sub.ch <- ev:
		sub.queued = max(sub.queued, ev.rv)
	default:
		close(sub.overflowed)
		delete(h.subs, sub)
	}
}

// testHookBeforeRecord, when set by a test, runs before the hub records
// each change its informer delivers: a test slows the hub's fan-out down
// with it.
var testHookBeforeRecord atomic.Pointer[func(schema.GroupVersionKind)]

// barrier waits until the hub has recorded every change up to version want
// (bounded by ctx), then queues a BOOKMARK at its latest version for every
// stream that has nothing queued that recent, so that each stream delivers
// a message at or after that version once it has sent the changes before
// it. It returns that version, and whether the hub got to want in time.
func (h *hub) barrier(ctx context.Context, want uint64) (uint64, bool) {
	h.mu.Lock()
	for h.latest < want {
		if h.advanced == nil {
			h.advanced = make(chan struct{})
		}
		advanced := h.advanced
		h.mu.Unlock()
		select {
		case <-advanced:
		case <-ctx.Done():
			h.mu.Lock()
			v := h.bookmark()
			h.mu.Unlock()
			return v, false
		}
		h.mu.Lock()
	}
	defer h.mu.Unlock()
	return h.bookmark(), true
}

// bookmark queues a BOOKMARK at the latest version for every stream whose
// last queued message is older, and returns that version. h.mu is held.
func (h *hub) bookmark() uint64 {
	for sub := range h.subs {
		if sub.queued < h.latest {
			h.queue(sub, watchEvent{typ: polyopv1alpha1.WatchEventType_WATCH_EVENT_TYPE_BOOKMARK, rv: h.latest})
		}
	}
	return h.latest
}

// selected is ev as the stream sees it, given the object's previous state
// (ev.prev), as the API server reports a selection: a change that brings
// the object into the selection is ADDED, one that takes it out is DELETED,
// and a change outside it is not sent.
func (sub *subscriber) selected(ev watchEvent) (watchEvent, bool) {
	now := sub.match(ev.obj)
	if ev.typ != polyopv1alpha1.WatchEventType_WATCH_EVENT_TYPE_MODIFIED {
		return ev, now
	}
	was := ev.prev != nil && sub.match(ev.prev)
	switch {
	case was && !now:
		ev.typ = polyopv1alpha1.WatchEventType_WATCH_EVENT_TYPE_DELETED
	case !was && now:
		ev.typ = polyopv1alpha1.WatchEventType_WATCH_EVENT_TYPE_ADDED
	}
	return ev, was || now
}

// subscribe adds a stream. Without a resume version it returns the objects
// the stream selects, as its initial list, and the version they are current
// at; with one, the remembered changes after it, or an error when the hub no
// longer remembers that far back.
func (h *hub) subscribe(sub *subscriber, resume string) (initial []watchEvent, rv uint64, err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if resume == "" {
		for _, obj := range h.objects {
			if sub.match(obj) {
				v, _ := strconv.ParseUint(obj.GetResourceVersion(), 10, 64)
				initial = append(initial, watchEvent{typ: polyopv1alpha1.WatchEventType_WATCH_EVENT_TYPE_ADDED, obj: obj, rv: v})
			}
		}
		sub.queued = h.latest
		h.subs[sub] = struct{}{}
		return initial, h.latest, nil
	}
	from, err := strconv.ParseUint(resume, 10, 64)
	if err != nil {
		return nil, 0, invalid("resource_version %q is not a resource version the host issued", resume)
	}
	if from < h.since {
		return nil, 0, expired(h.gvk, resume, h.since)
	}
	for _, ev := range h.events {
		if ev.rv <= from {
			continue
		}
		if ev, ok := sub.selected(ev); ok {
			initial = append(initial, ev)
		}
	}
	sub.skipUpTo = max(from, h.latest)
	sub.queued = sub.skipUpTo
	// The stream says at once how far it has got, even when no change
	// since from is selected: a call may be waiting for it (see barrier).
	if h.latest > from && (len(initial) == 0 || initial[len(initial)-1].rv < h.latest) {
		initial = append(initial, watchEvent{typ: polyopv1alpha1.WatchEventType_WATCH_EVENT_TYPE_BOOKMARK, rv: h.latest})
	}
	h.subs[sub] = struct{}{}
	return initial, h.latest, nil
}

// unsubscribe removes a stream.
func (h *hub) unsubscribe(sub *subscriber) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.subs, sub)
}

// idleVersion is the hub's latest version when the stream has nothing waiting
// to be sent (so every change up to it was sent or not selected), false
// otherwise.
func (h *hub) idleVersion(sub *subscriber) (uint64, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	idle := len(sub.ch) == 0
	if idle {
		sub.queued = max(sub.queued, h.latest)
	}
	return h.latest, idle
}

// subscribers counts the streams of the hub.
func (h *hub) subscribers() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.subs)
}

// expired is the error of a resume the hub cannot serve.
func expired(gvk schema.GroupVersionKind, resume string, since uint64) error {
	return failedPrecondition("resource version %s of %s is too old: expired, the host remembers changes after %d only; relist: watch again without resource_version",
		resume, gvk.Kind, since)
}

// watchers counts the Watch streams the server serves.
func (s *Server) watchers() int {
	s.hubsMu.Lock()
	defer s.hubsMu.Unlock()
	n := 0
	for _, h := range s.hubs {
		n += h.subscribers()
	}
	return n
}

// hubsCopy is a copy of hubList, empty before the first hub.
func (s *Server) hubsCopy() []*hub {
	if list := s.hubList.Load(); list != nil {
		return slices.Clone(*list)
	}
	return nil
}
