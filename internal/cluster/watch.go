package cluster

import (
	"encoding/json"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	polyopv1alpha1 "github.com/polyop/polyop/sdk/go/gen/polyop/v1alpha1"
)

// Watch implements polyopv1alpha1.ClusterServiceServer: it streams the
// objects of a kind the host caches from the kind's informer (see hub), and
// ends when the client goes, when the host stops (UNAVAILABLE), or when the
// client falls more than Options.WatchBuffer events behind
// (RESOURCE_EXHAUSTED).
func (s *Server) Watch(req *polyopv1alpha1.WatchRequest, stream polyopv1alpha1.ClusterService_WatchServer) error {
	ctx := stream.Context()
	m, err := s.mapping(req.GetKind())
	if err != nil {
		return err
	}
	gvk := m.GroupVersionKind
	namespace := ""
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		namespace = req.GetNamespace()
	}
	if err := s.allowRead("watch", m, namespace, ""); err != nil {
		return err
	}
	if s.clients.Informers == nil || !s.cached(gvk, namespace) {
		return s.refuseWatch(gvk, namespace)
	}
	match, err := selection(namespace, req.GetLabelSelector(), req.GetFieldSelector())
	if err != nil {
		return err
	}
	h, err := s.hubFor(ctx, gvk)
	if err != nil {
		return err
	}
	sub := &subscriber{match: match, ch: make(chan watchEvent, s.opts.WatchBuffer), overflowed: make(chan struct{})}
	initial, rv, err := h.subscribe(sub, req.GetResourceVersion())
	if err != nil {
		return err
	}
	defer h.unsubscribe(sub)
	log := s.opts.Log.WithValues("kind", gvk.String(), "namespace", namespace)
	log.V(1).Info("watch started", "resourceVersion", req.GetResourceVersion(), "initial", len(initial))
	defer log.V(1).Info("watch ended")

	// The stream is sent from a goroutine of its own, so that a client that
	// stops reading, and so blocks it in Send once gRPC's flow control
	// window is full, is still cut off when its buffer overflows: returning
	// ends the stream, which unblocks the Send.
	quit := make(chan struct{})
	defer close(quit)
	sent := make(chan error, 1)
	go func() { sent <- s.sendWatch(stream, h, sub, initial, req.GetResourceVersion() == "", rv, quit) }()
	select {
	case err := <-sent:
		return err
	case <-sub.overflowed:
		log.Info("watch cut off: the client reads its events too slowly", "buffer", s.opts.WatchBuffer)
		return status.Errorf(codes.ResourceExhausted,
			"the watch of %s fell more than %d events behind and was cut off: read the stream faster, then watch again from the last resource version",
			gvk.Kind, s.opts.WatchBuffer)
	case <-s.stopping:
		return status.Error(codes.Unavailable, "the host is shutting down: watch again once it is back")
	case <-ctx.Done():
		return status.FromContextError(ctx.Err()).Err()
	}
}

// refuseWatch is the error of a Watch of gvk in namespace ("" for every
// namespace), which the host does not cache, naming a remedy that works.
func (s *Server) refuseWatch(gvk schema.GroupVersionKind, namespace string) error {
	where := "in every namespace"
	if namespace != "" {
		where = "in namespace " + namespace
	}
	if namespaces := s.opts.CachedKinds[gvk]; len(namespaces) > 0 && s.clients.Informers != nil {
		return failedPrecondition("the host caches %s in namespaces %s only, not %s, and watches only what it caches: "+
			"watch in one of those namespaces, or declare %s for cached reads in the namespaces you need (within the host's --namespace, when that is set)",
			gvk.Kind, strings.Join(namespaces, ", "), where, gvk.Kind)
	}
	return failedPrecondition("the host does not cache %s %s, and watches only the kinds it caches: "+
		"declare %s for cached reads in the sidecar (a cached kind in its description: CacheKind in Go, cache_kind in Python, cacheKind in TypeScript), "+
		"or a controller that reconciles, owns or watches %s; the host reads the description when it starts",
		gvk.Kind, where, gvk.Kind, gvk.Kind)
}

// sendWatch sends a stream's initial events, the INITIAL_LIST_DONE marker
// when listed is set, then its changes and bookmarks, until quit is closed or
// a Send fails.
func (s *Server) sendWatch(stream polyopv1alpha1.ClusterService_WatchServer, h *hub, sub *subscriber,
	initial []watchEvent, listed bool, rv uint64, quit <-chan struct{}) error {
	for _, ev := range initial {
		if err := send(stream, h.gvk, ev); err != nil {
			return err
		}
	}
	if listed {
		if err := stream.Send(&polyopv1alpha1.WatchResponse{
			Type:            polyopv1alpha1.WatchEventType_WATCH_EVENT_TYPE_INITIAL_LIST_DONE,
			ResourceVersion: strconv.FormatUint(rv, 10),
		}); err != nil {
			return err
		}
	}
	bookmarks := time.NewTicker(s.opts.WatchBookmarkInterval)
	defer bookmarks.Stop()
	for {
		select {
		case <-quit:
			return nil
		case ev := <-sub.ch:
			if err := send(stream, h.gvk, ev); err != nil {
				return err
			}
		case <-bookmarks.C:
			if v, idle := h.idleVersion(sub); idle {
				if err := stream.Send(&polyopv1alpha1.WatchResponse{
					Type:            polyopv1alpha1.WatchEventType_WATCH_EVENT_TYPE_BOOKMARK,
					ResourceVersion: strconv.FormatUint(v, 10),
				}); err != nil {
					return err
				}
			}
		}
	}
}

// send sends one change, its object with its apiVersion and kind: the cache's
// objects may have none (a list's items come without), and are shared, so a
// copy gets them (object.Object's copy shares the JSON, and costs little).
// A BOOKMARK (see hub.barrier) carries its version alone.
func send(stream polyopv1alpha1.ClusterService_WatchServer, gvk schema.GroupVersionKind, ev watchEvent) error {
	if ev.typ == polyopv1alpha1.WatchEventType_WATCH_EVENT_TYPE_BOOKMARK {
		return stream.Send(&polyopv1alpha1.WatchResponse{Type: ev.typ, ResourceVersion: strconv.FormatUint(ev.rv, 10)})
	}
	obj := ev.obj
	if obj.GetObjectKind().GroupVersionKind() != gvk {
		obj = obj.DeepCopyObject().(client.Object)
		obj.GetObjectKind().SetGroupVersionKind(gvk)
	}
	raw, err := json.Marshal(obj)
	if err != nil {
		return toStatus(err)
	}
	return stream.Send(&polyopv1alpha1.WatchResponse{
		Type:            ev.typ,
		Object:          raw,
		ResourceVersion: ev.obj.GetResourceVersion(),
	})
}

// selection builds the stream's filter: the namespace ("" for every one), a
// label selector and a field selector on metadata.name and
// metadata.namespace.
func selection(namespace, labelSelector, fieldSelector string) (func(client.Object) bool, error) {
	ls := labels.Everything()
	if labelSelector != "" {
		var err error
		if ls, err = labels.Parse(labelSelector); err != nil {
			return nil, invalid("label_selector: %v", err)
		}
	}
	fs := fields.Everything()
	if fieldSelector != "" {
		var err error
		if fs, err = fields.ParseSelector(fieldSelector); err != nil {
			return nil, invalid("field_selector: %v", err)
		}
		for _, r := range fs.Requirements() {
			if r.Field != "metadata.name" && r.Field != "metadata.namespace" {
				return nil, invalid("field_selector %q: Watch selects by metadata.name and metadata.namespace only, not by %s", fieldSelector, r.Field)
			}
		}
	}
	return func(obj client.Object) bool {
		return (namespace == "" || obj.GetNamespace() == namespace) &&
			ls.Matches(labels.Set(obj.GetLabels())) &&
			fs.Matches(fields.Set{"metadata.name": obj.GetName(), "metadata.namespace": obj.GetNamespace()})
	}, nil
}
