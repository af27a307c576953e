package controller

import (
	"context"
	"sync"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/polyop/polyop/internal/fakesidecar"
	"github.com/polyop/polyop/internal/object"
	polyopv1alpha1 "github.com/polyop/polyop/sdk/go/gen/polyop/v1alpha1"
)

// fakeProgress records what it is told and answers fixed versions.
type fakeProgress struct {
	mu       sync.Mutex
	seen     []string
	versions []*polyopv1alpha1.CacheVersion
}

func (p *fakeProgress) Seen(gvk schema.GroupVersionKind, obj client.Object) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.seen = append(p.seen, gvk.Kind+" "+obj.GetName()+"@"+obj.GetResourceVersion())
}

func (p *fakeProgress) Versions(context.Context) []*polyopv1alpha1.CacheVersion {
	return p.versions
}

func TestEveryCallToTheSidecarCarriesTheCacheVersions(t *testing.T) {
	t.Parallel()
	const finalizer = "example.com/cleanup"
	sc := &fakesidecar.Fake{
		OnReconcile: fakesidecar.Answer(func(*polyopv1alpha1.ReconcileRequest) *polyopv1alpha1.ReconcileResponse {
			return &polyopv1alpha1.ReconcileResponse{}
		}),
		OnFinalize: fakesidecar.Answer(func(*polyopv1alpha1.FinalizeRequest) *polyopv1alpha1.FinalizeResponse {
			return &polyopv1alpha1.FinalizeResponse{}
		}),
	}
	r, c, _ := newFlow(t, finalizer, sc, ownerMap())
	want := &polyopv1alpha1.CacheVersion{Kind: &polyopv1alpha1.GroupVersionKind{Version: "v1", Kind: "Secret"}, ResourceVersion: "42"}
	r.progress = &fakeProgress{versions: []*polyopv1alpha1.CacheVersion{want}}
	ctx := context.Background()
	if _, err := r.Reconcile(ctx, req); err != nil {
		t.Fatal(err)
	}
	cm := object.New(configMapGVK)
	if err := c.Get(ctx, req.NamespacedName, cm); err != nil {
		t.Fatal(err)
	}
	cm.SetGroupVersionKind(configMapGVK)
	if err := c.Delete(ctx, cm); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Reconcile(ctx, req); err != nil {
		t.Fatal(err)
	}
	if got := sc.Reconciles(); len(got) != 1 || len(got[0].GetCacheVersions()) != 1 || got[0].GetCacheVersions()[0].GetResourceVersion() != "42" {
		t.Errorf("Reconcile requests %v, want one carrying Secret at 42", got)
	}
	if got := sc.Finalizes(); len(got) != 1 || len(got[0].GetCacheVersions()) != 1 || got[0].GetCacheVersions()[0].GetKind().GetKind() != "Secret" {
		t.Errorf("Finalize requests %v, want one carrying Secret at 42", got)
	}
}

func TestAWatchedKindsHandlerRecordsWhatItSeesBeforeItEnqueues(t *testing.T) {
	t.Parallel()
	p := &fakeProgress{}
	var order []string
	next := handler.Funcs{
		CreateFunc: func(_ context.Context, e event.CreateEvent, _ workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			p.mu.Lock()
			defer p.mu.Unlock()
			order = append(order, "enqueued after "+string(rune('0'+len(p.seen)))+" seen")
		},
	}
	h := seeing(p, secretGVK, next)
	secret := func(name, rv string) client.Object {
		o := object.New(secretGVK)
		o.ObjectMeta = metav1.ObjectMeta{Namespace: "ns", Name: name, ResourceVersion: rv}
		return o
	}
	ctx := context.Background()
	h.Create(ctx, event.CreateEvent{Object: secret("a", "5")}, nil)
	h.Update(ctx, event.UpdateEvent{ObjectOld: secret("a", "5"), ObjectNew: secret("a", "6")}, nil)
	h.Delete(ctx, event.DeleteEvent{Object: secret("b", "7")}, nil)
	h.Generic(ctx, event.GenericEvent{Object: secret("c", "8")}, nil)
	want := []string{"Secret a@5", "Secret a@6", "Secret b@7", "Secret c@8"}
	if len(p.seen) != len(want) {
		t.Fatalf("seen %q, want %q", p.seen, want)
	}
	for i := range want {
		if p.seen[i] != want[i] {
			t.Errorf("seen %q, want %q", p.seen, want)
		}
	}
	if len(order) != 1 || order[0] != "enqueued after 1 seen" {
		t.Errorf("the handler ran %q, want once, after its event was seen", order)
	}
	if seeing(nil, secretGVK, next) == nil {
		t.Error("without a CacheProgress the handler is lost")
	}
}

func TestTheReconciledKindsEventsAreRecordedBeforeTheUpdateFilters(t *testing.T) {
	t.Parallel()
	p := &fakeProgress{}
	preds := seenPredicates(p, configMapGVK)
	if len(preds) != 1 {
		t.Fatalf("%d predicates, want 1", len(preds))
	}
	cm := object.New(configMapGVK)
	cm.ObjectMeta = metav1.ObjectMeta{Namespace: "ns", Name: "o", ResourceVersion: "11"}
	if !preds[0].Update(event.UpdateEvent{ObjectOld: cm, ObjectNew: cm}) || !preds[0].Create(event.CreateEvent{Object: cm}) {
		t.Error("the recording predicate dropped an event")
	}
	if len(p.seen) != 2 || p.seen[0] != "ConfigMap o@11" {
		t.Errorf("seen %q, want ConfigMap o@11 twice", p.seen)
	}
	if seenPredicates(nil, configMapGVK) != nil {
		t.Error("predicates without a CacheProgress")
	}
}
