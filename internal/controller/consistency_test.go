package controller

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/polyop/polyop/internal/description"
	"github.com/polyop/polyop/internal/fakesidecar"
	"github.com/polyop/polyop/internal/object"
)

// laggingCache is a Reconciler whose cache returns the owner at resource
// version 5 for its first stale reads, and at 7 (the host's own last write)
// after them; never, for stale < 0. It counts the reads.
func laggingCache(t *testing.T, stale int) (*Reconciler, *atomic.Int32) {
	t.Helper()
	scheme := runtime.NewScheme()
	object.AddToScheme(scheme, configMapGVK)
	var reads atomic.Int32
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(asObject(t, ownerMap())).
		WithInterceptorFuncs(interceptor.Funcs{Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			err := c.Get(ctx, key, obj, opts...)
			obj.SetResourceVersion("5")
			if n := reads.Add(1); stale >= 0 && int(n) > stale {
				obj.SetResourceVersion("7")
			}
			return err
		}}).
		Build()
	r := NewReconciler(description.Controller{Name: "maps", GVK: configMapGVK}, c, &fakesidecar.Fake{}, ReconcilerOptions{})
	r.written.record(req.NamespacedName, "7")
	return r, &reads
}

func TestAwaitOwnWrite(t *testing.T) {
	t.Parallel()
	stale := func() *object.Object {
		o := asObject(t, ownerMap())
		o.SetResourceVersion("5")
		return o
	}
	t.Run("if the cache catches up, then the object read last is the written one", func(t *testing.T) {
		t.Parallel()
		r, reads := laggingCache(t, 3)
		obj := stale()
		if err := r.awaitOwnWrite(context.Background(), req, obj); err != nil {
			t.Fatal(err)
		}
		if obj.GetResourceVersion() != "7" || reads.Load() != 4 || r.written.get(req.NamespacedName) != "" {
			t.Errorf("after %d reads the object is at %s and the write remembered at %q; want 4 reads, 7, and nothing remembered",
				reads.Load(), obj.GetResourceVersion(), r.written.get(req.NamespacedName))
		}
	})
	t.Run("if the cache never catches up, then the reconcile goes on with what it holds", func(t *testing.T) {
		t.Parallel()
		r, reads := laggingCache(t, -1)
		obj := stale()
		if err := r.awaitOwnWrite(context.Background(), req, obj); err != nil {
			t.Fatal(err)
		}
		if obj.GetResourceVersion() != "5" || reads.Load() < 2 || r.written.get(req.NamespacedName) != "7" {
			t.Errorf("after %d reads the object is at %s and the write remembered at %q; want several reads, 5, and 7 remembered",
				reads.Load(), obj.GetResourceVersion(), r.written.get(req.NamespacedName))
		}
	})
	t.Run("if the reconcile is cancelled, then its context's error", func(t *testing.T) {
		t.Parallel()
		r, _ := laggingCache(t, -1)
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if err := r.awaitOwnWrite(ctx, req, stale()); !errors.Is(err, context.Canceled) {
			t.Errorf("error = %v, want context.Canceled", err)
		}
	})
}
