package controller

import (
	"context"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	"github.com/polyop/polyop/internal/fencing"
)

// fenceRetry is how soon an object is looked at again after a reconcile
// that did nothing because the replica did not hold its lease: by then it
// has renewed the lease, or another replica has the object and this one's
// cache has let go of it.
const fenceRetry = time.Second

// beginTerm records in ctx the term the reconcile begins under. ok is
// false when the replica does not hold its lease: the reconcile must not
// begin.
func (r *Reconciler) beginTerm(ctx context.Context) (_ context.Context, ok bool) {
	if r.fence == nil {
		return ctx, true
	}
	t := r.fence.Term()
	if !t.Valid() {
		return ctx, false
	}
	return fencing.WithTerm(ctx, t), true
}

// termLapsed is the LapsedError when the term the reconcile began under is
// no longer held; nil while it is, or without a fence.
func (r *Reconciler) termLapsed(ctx context.Context) error {
	begun, ok := fencing.TermFrom(ctx)
	if r.fence == nil || !ok {
		return nil
	}
	return fencing.Check(r.fence, begun)
}

// writeContext is the context of one write of the reconcile: ctx, ended at
// the end of the term the reconcile began under, or a LapsedError when that
// term is no longer held (see fencing.WriteContext). done wraps the write's
// error: a write the term's end cut off fails with the LapsedError.
func (r *Reconciler) writeContext(ctx context.Context) (wctx context.Context, done func(error) error, err error) {
	begun, ok := fencing.TermFrom(ctx)
	if r.fence == nil || !ok {
		return ctx, func(err error) error { return err }, nil
	}
	wctx, cancel, err := fencing.WriteContext(ctx, r.fence, begun)
	if err != nil {
		return ctx, nil, err
	}
	return wctx, func(err error) error {
		err = fencing.Cause(wctx, err)
		cancel()
		return err
	}, nil
}

// write makes one write of the reconcile, in its writeContext.
func (r *Reconciler) write(ctx context.Context, w func(context.Context) error) error {
	wctx, done, err := r.writeContext(ctx)
	if err != nil {
		return err
	}
	return done(w(wctx))
}

// discardLapsed ends a reconcile whose term ended before or while it wrote:
// nothing more is written, the answer is not acted on, and the object is
// looked at again once the replica holds its lease (and then only if it is
// still the replica's).
func discardLapsed(log logr.Logger, what string, err error) (reconcile.Result, error) {
	log.Info("not writing: "+what+" began under a lease the replica no longer holds", "reason", err.Error())
	return reconcile.Result{RequeueAfter: fenceRetry}, nil
}

// fencedRecorder records an event only while the replica holds its lease:
// a replica paused past its lease tells nothing of objects that are no
// longer its own.
type fencedRecorder struct {
	recorder.EventRecorder
	fence fencing.Fence
}

// Eventf implements events.EventRecorder.
func (f fencedRecorder) Eventf(regarding, related runtime.Object, eventtype, reason, action, note string, args ...any) {
	if f.fence.Term().Valid() {
		f.EventRecorder.Eventf(regarding, related, eventtype, reason, action, note, args...)
	}
}

var _ events.EventRecorder = fencedRecorder{}
