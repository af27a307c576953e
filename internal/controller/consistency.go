package controller

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/util/resourceversion"
	"k8s.io/apimachinery/pkg/util/wait"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/polyop/polyop/internal/object"
)

// ownWriteWait bounds how long a reconcile waits for the cache to catch up
// with the host's own last write of the object; past it, the reconcile goes
// on with what the cache holds, as controller-runtime would.
const ownWriteWait = 2 * time.Second

// ownWritePoll is how often the cache is read meanwhile: it costs no API
// request, and an informer usually sees a write within milliseconds.
const ownWritePoll = 10 * time.Millisecond

// awaitOwnWrite waits, when the cache holds an older version of obj than the
// host's own last write of it (its status, or its finalizer), until the cache
// catches up, and updates obj. A reconcile that another event started right
// after such a write then sees the object as written: it neither hands the
// sidecar a stale object nor writes a status that conflicts. It costs no API
// request: it polls the cache. Resource versions are compared as the API
// server allows (k8s.io/apimachinery/pkg/util/resourceversion); an API server
// whose versions do not compare is never waited for.
func (r *Reconciler) awaitOwnWrite(ctx context.Context, req reconcile.Request, obj *object.Object) error {
	last := r.written.get(req.NamespacedName)
	if last == "" {
		return nil
	}
	if !olderThan(obj.GetResourceVersion(), last) {
		// The cache has seen the write: nothing to remember any more.
		r.written.forgetIf(req.NamespacedName, last)
		return nil
	}
	start := time.Now()
	err := wait.PollUntilContextTimeout(ctx, ownWritePoll, ownWriteWait, false, func(ctx context.Context) (bool, error) {
		if err := r.get(ctx, req.NamespacedName, obj); err != nil {
			return false, fmt.Errorf("reading %s %s from the cache: %w", r.Controller.GVK.Kind, req.NamespacedName, err)
		}
		return !olderThan(obj.GetResourceVersion(), last), nil
	})
	switch {
	case err == nil:
		r.written.forgetIf(req.NamespacedName, last)
		logf.FromContext(ctx).V(1).Info("waited for the cache to see the host's own write", "waited", time.Since(start).String())
		return nil
	case ctx.Err() != nil:
		return ctx.Err()
	case wait.Interrupted(err):
		logf.FromContext(ctx).V(1).Info("the cache has not seen the host's own write; going on with it", "cached", obj.GetResourceVersion(), "written", last)
		return nil
	}
	return err
}

// olderThan reports whether resource version a is known to be older than b.
func olderThan(a, b string) bool {
	cmp, err := resourceversion.CompareResourceVersion(a, b)
	return err == nil && cmp < 0
}

// writtenVersions remembers the resource version of the host's last write of
// each reconciled object, until a reconcile finds the cache has seen it.
type writtenVersions = keyed[string]

func newWrittenVersions() *writtenVersions { return newKeyed[string]() }
