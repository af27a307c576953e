package controller

import (
	"context"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/polyop/polyop/internal/description"
	"github.com/polyop/polyop/internal/fakesidecar"
	"github.com/polyop/polyop/internal/object"
	"github.com/polyop/polyop/internal/testenv"
	polyopv1alpha1 "github.com/polyop/polyop/sdk/go/gen/polyop/v1alpha1"
)

// TestAStatusIsWrittenOnlyWhenItChanges runs a Reconciler as the host does
// (reads from an informer cache, writes to the API server) and counts its
// API requests. The Gadget schema knows only status.phase, so the API server
// drops the other field of the sidecar's status: the object never holds the
// status exactly as sent, and only the host's own last write tells that
// writing it again would change nothing.
func TestAStatusIsWrittenOnlyWhenItChanges(t *testing.T) {
	e := controlPlane(t)
	ns := testNamespace(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	scheme := envScheme(gadgetGVK)
	informers, err := cache.New(e.Config, cache.Options{Scheme: scheme, DefaultNamespaces: map[string]cache.Config{ns: {}}})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { defer close(done); _ = informers.Start(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	c, counter := countingClient(t, scheme, informers)

	gadget := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "envtest.polyop.dev/v1", "kind": "Gadget",
		"metadata": map[string]any{"namespace": ns, "name": "g"},
		"spec":     map[string]any{"value": "v1"},
	}}
	plain := plainClient(t)
	if err := plain.Create(ctx, gadget); err != nil {
		t.Fatal(err)
	}
	key := client.ObjectKeyFromObject(gadget)
	status := []byte(`{"phase":"Ready","dropped":"by the API server"}`)
	sc := &fakesidecar.Fake{OnReconcile: fakesidecar.Answer(func(*polyopv1alpha1.ReconcileRequest) *polyopv1alpha1.ReconcileResponse {
		return &polyopv1alpha1.ReconcileResponse{Status: status}
	})}
	r := NewReconciler(description.Controller{Name: "gadgets", GVK: gadgetGVK}, c, sc, ReconcilerOptions{})
	cached := func(desc string, ok func(*object.Object) bool) {
		t.Helper()
		testenv.Eventually(t, time.Minute, "the cache sees "+desc, func() (bool, string) {
			o := object.New(gadgetGVK)
			if err := informers.Get(ctx, key, o); err != nil {
				return false, err.Error()
			}
			return ok(o), o.GetResourceVersion()
		})
	}
	phase := func(want string) func(*object.Object) bool {
		return func(o *object.Object) bool {
			p, _ := o.DecodeField("status")
			m, _ := p.(map[string]any)
			return m["phase"] == want
		}
	}
	reconcileCounting := func(want string) {
		t.Helper()
		counter.take()
		if _, err := r.Reconcile(ctx, reconcile.Request{NamespacedName: key}); err != nil {
			t.Fatal(err)
		}
		if got := counter.take(); got != want {
			t.Errorf("the reconcile made the API requests %q, want %q", got, want)
		}
	}

	cached("the gadget", func(*object.Object) bool { return true })
	reconcileCounting("PATCH=1")
	cached("the status written", phase("Ready"))

	// The sidecar answers the same status: nothing to write, though the
	// object's status is not the one sent.
	reconcileCounting("")
	reconcileCounting("")

	// Someone else changes the status: the sidecar's is written again.
	if err := plain.Get(ctx, key, gadget); err != nil {
		t.Fatal(err)
	}
	gadget.Object["status"] = map[string]any{"phase": "Broken"}
	if err := plain.Status().Update(ctx, gadget); err != nil {
		t.Fatal(err)
	}
	cached("the other writer's status", phase("Broken"))
	reconcileCounting("PATCH=1")
	cached("the status written back", phase("Ready"))
	if err := plain.Get(ctx, key, gadget); err != nil {
		t.Fatal(err)
	}
	if got, _, _ := unstructured.NestedString(gadget.Object, "status", "phase"); got != "Ready" {
		t.Errorf("the status is %v, want phase Ready", gadget.Object["status"])
	}

	// The sidecar answers another status: it is written.
	status = []byte(`{"phase":"Done","dropped":"again"}`)
	reconcileCounting("PATCH=1")
	cached("the new status", phase("Done"))
	reconcileCounting("")
}
