package controller

import (
	"context"
	"slices"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/polyop/polyop/internal/fakesidecar"
	"github.com/polyop/polyop/internal/object"
)

// TestAFinalizerPatchFromAStaleObjectIsAConflict: the finalizers are written
// with the resourceVersion the host read, so that a finalizer someone else
// added meanwhile is never overwritten.
func TestAFinalizerPatchFromAStaleObjectIsAConflict(t *testing.T) {
	t.Parallel()
	const finalizer = "example.com/cleanup"
	r, c, _ := newFlow(t, finalizer, &fakesidecar.Fake{}, ownerMap())
	ctx := context.Background()
	read := func() *object.Object {
		t.Helper()
		o := object.New(configMapGVK)
		if err := c.Get(ctx, req.NamespacedName, o); err != nil {
			t.Fatal(err)
		}
		o.SetGroupVersionKind(configMapGVK)
		return o
	}

	stale := read()
	other := read()
	controllerutil.AddFinalizer(other, "example.com/other")
	if err := c.Update(ctx, other); err != nil {
		t.Fatal(err)
	}
	if err := r.patchFinalizers(ctx, stale, controllerutil.AddFinalizer, spanAddFinalizer); !apierrors.IsConflict(err) {
		t.Fatalf("patching the finalizers of a stale object: %v, want a conflict", err)
	}

	fresh := read()
	if err := r.patchFinalizers(ctx, fresh, controllerutil.AddFinalizer, spanAddFinalizer); err != nil {
		t.Fatal(err)
	}
	if got := read().GetFinalizers(); !slices.Equal(got, []string{"example.com/other", finalizer}) {
		t.Errorf("finalizers = %v, want the other one kept and ours added", got)
	}
	if fresh.GroupVersionKind() != configMapGVK || fresh.GetResourceVersion() == other.GetResourceVersion() {
		t.Errorf("the patched object is not what the API server stored: %v at %s", fresh.GroupVersionKind(), fresh.GetResourceVersion())
	}
}
