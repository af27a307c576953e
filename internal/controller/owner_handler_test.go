package controller

import (
	"context"
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/polyop/polyop/internal/object"
)

// ownerHandler enqueues what handler.EnqueueRequestForOwner with
// OnlyControllerOwner enqueues, for a namespaced and a cluster-scoped owner
// kind, on every kind of event.
func TestOwnerHandlerEnqueuesWhatEnqueueRequestForOwnerDoes(t *testing.T) {
	t.Parallel()
	namespacedGVK := schema.GroupVersionKind{Group: "e2e.polyop.dev", Version: "v1", Kind: "Widget"}
	clusterGVK := schema.GroupVersionKind{Group: "e2e.polyop.dev", Version: "v1", Kind: "ClusterWidget"}
	// The API server serves v1 and v2 of both kinds.
	mapper := meta.NewDefaultRESTMapper(nil)
	for _, v := range []string{"v1", "v2"} {
		mapper.Add(namespacedGVK.GroupKind().WithVersion(v), meta.RESTScopeNamespace)
		mapper.Add(clusterGVK.GroupKind().WithVersion(v), meta.RESTScopeRoot)
	}
	scheme := runtime.NewScheme()
	scheme.AddKnownTypeWithName(namespacedGVK, &unstructured.Unstructured{})
	scheme.AddKnownTypeWithName(clusterGVK, &unstructured.Unstructured{})

	child := func(refs ...metav1.OwnerReference) client.Object {
		o := object.New(secretGVK)
		o.Namespace, o.Name, o.OwnerReferences = "ns", "child", refs
		return o
	}
	ref := func(apiVersion, kind, name string, controller bool) metav1.OwnerReference {
		return metav1.OwnerReference{APIVersion: apiVersion, Kind: kind, Name: name, UID: types.UID("uid-" + name), Controller: &controller}
	}
	objects := []client.Object{
		child(),
		child(ref("e2e.polyop.dev/v1", "Widget", "a", true)),
		child(ref("e2e.polyop.dev/v2", "Widget", "a", true)),
		child(ref("e2e.polyop.dev/v1", "Widget", "a", false)),
		child(ref("e2e.polyop.dev/v1", "Widget", "a", false), ref("e2e.polyop.dev/v1", "Widget", "b", true)),
		child(ref("other.dev/v1", "Widget", "a", true)),
		child(ref("e2e.polyop.dev/v1", "Gadget", "a", true)),
		child(ref("e2e.polyop.dev/v1", "ClusterWidget", "c", true)),
		child(ref("a/b/c", "Widget", "a", true)),
	}

	for _, gvk := range []schema.GroupVersionKind{namespacedGVK, clusterGVK} {
		want := handler.EnqueueRequestForOwner(scheme, mapper, ownerType(gvk), handler.OnlyControllerOwner())
		got := ownerHandler{owner: gvk.GroupKind(), namespaced: gvk == namespacedGVK}
		for i, obj := range objects {
			for j, other := range append([]client.Object{nil}, objects...) {
				events := map[string]func(h handler.EventHandler, q queue){
					"create": func(h handler.EventHandler, q queue) {
						h.Create(context.Background(), event.CreateEvent{Object: obj}, q)
					},
					"delete": func(h handler.EventHandler, q queue) {
						h.Delete(context.Background(), event.DeleteEvent{Object: obj}, q)
					},
					"generic": func(h handler.EventHandler, q queue) {
						h.Generic(context.Background(), event.GenericEvent{Object: obj}, q)
					},
				}
				if other != nil {
					events = map[string]func(h handler.EventHandler, q queue){
						"update": func(h handler.EventHandler, q queue) {
							h.Update(context.Background(), event.UpdateEvent{ObjectOld: other, ObjectNew: obj}, q)
						},
					}
				}
				for name, send := range events {
					if g, w := enqueued(got, send), enqueued(want, send); !slices.Equal(g, w) {
						t.Errorf("%s, %s of object %d (old %d): enqueued %v, EnqueueRequestForOwner %v", gvk.Kind, name, i, j, g, w)
					}
				}
			}
		}
	}
}

// ownerType is the owner type of handler.EnqueueRequestForOwner for
// reconciled kind gvk.
func ownerType(gvk schema.GroupVersionKind) client.Object {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	return u
}

// enqueued are the requests send adds to a queue through h, sorted.
func enqueued(h handler.EventHandler, send func(handler.EventHandler, queue)) []string {
	q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
	defer q.ShutDown()
	send(h, q)
	var out []string
	for q.Len() > 0 {
		r, _ := q.Get()
		out = append(out, r.String())
		q.Done(r)
	}
	slices.Sort(out)
	return out
}
