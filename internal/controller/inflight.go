package controller

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/polyop/polyop/internal/sidecar"
)

// Two kinds of failed call are not the object's failure, and neither grows
// its backoff nor counts in the retries its next call carries:
//
//   - a call for an object the sidecar may still be working on (its last
//     call outlived its deadline, and the sidecar has not answered it yet:
//     sidecar.InFlightError). The object waits, and is requeued at once when
//     the sidecar client releases it.
//   - a call that found the sidecar unreachable (sidecar.IsUnavailable: no
//     connection, or the process went away under the call). The object
//     waits for the sidecar, and is requeued at once when it answers again
//     (see sidecarState.watch).
//
// Both need the controller's queue, which the controller hands over when it
// starts (queueSource). A Reconciler without one (built by NewReconciler
// alone) returns those failures as errors, retried with backoff.

// workQueue is the controller's workqueue, once it started.
type workQueue struct {
	mu sync.Mutex
	q  workqueue.TypedRateLimitingInterface[reconcile.Request]
}

// source is a source that hands the controller's queue to q when the
// controller starts, and sends no event.
func (q *workQueue) source() source.Source {
	return source.Func(func(_ context.Context, wq workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
		q.mu.Lock()
		defer q.mu.Unlock()
		q.q = wq
		return nil
	})
}

func (q *workQueue) started() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.q != nil
}

// add adds req to the queue, to be reconciled at once (or as soon as its
// reconcile in progress ends), without touching its backoff.
func (q *workQueue) add(req reconcile.Request) {
	q.mu.Lock()
	wq := q.q
	q.mu.Unlock()
	if wq != nil {
		wq.Add(req)
	}
}

// released requeues the object the sidecar client released (see
// sidecar.Client.OnRelease).
func (r *Reconciler) released(namespace, name string) {
	r.queue.add(reconcile.Request{NamespacedName: types.NamespacedName{Namespace: namespace, Name: name}})
}

// waitingRetry is how soon an object waiting for the sidecar is retried if
// nothing requeued it before: the sidecar coming back requeues every waiting
// object at once, so this only bounds a wait whose wake-up was missed.
const waitingRetry = 10 * time.Second

// settle turns a reconcile's failed call that is not the object's failure
// into a wait: the object keeps its backoff (the Forget that follows a
// success is skipped) and is requeued when the sidecar can take its call.
func (r *Reconciler) settle(ctx context.Context, req reconcile.Request, res reconcile.Result, err error) (reconcile.Result, error) {
	if err == nil || !r.queue.started() {
		return res, err
	}
	log := logf.FromContext(ctx)
	var inFlight *sidecar.InFlightError
	var unreachable *unreachableError
	switch {
	case errors.As(err, &inFlight):
		// The sidecar client requeues it when it releases it.
		r.limiter.keep(req)
		log.V(1).Info("the sidecar may still be running the object's last call, past its deadline; waiting for its answer before calling it again")
		return reconcile.Result{}, nil
	case errors.As(err, &unreachable) && r.state.watched():
		r.limiter.keep(req)
		r.state.wait(r, req)
		log.V(1).Info("waiting for the sidecar to be back to call it again", "error", err.Error())
		retry := waitingRetry
		if r.limiter.downCap > 0 {
			retry = min(retry, r.limiter.downCap)
		}
		return reconcile.Result{RequeueAfter: retry}, nil
	}
	return res, err
}

// waiting are the objects waiting for the sidecar to be back, of every
// controller of the host: at most one entry per object.
type waiting struct {
	mu      sync.Mutex
	objects map[waitingObject]struct{}
	// kick wakes watch up when the first object waits.
	kick chan struct{}
	// running: watch runs.
	running bool
}

type waitingObject struct {
	r   *Reconciler
	req reconcile.Request
}

// checkInterval is how often watch asks the sidecar's health service while
// objects wait for it: a check over a local socket costs next to nothing,
// and each one lets gRPC reconnect as soon as its backoff allows.
const checkInterval = 100 * time.Millisecond

// wait makes req of r wait for the sidecar.
func (s *sidecarState) wait(r *Reconciler, req reconcile.Request) {
	s.waiting.mu.Lock()
	defer s.waiting.mu.Unlock()
	if s.waiting.objects == nil {
		s.waiting.objects = map[waitingObject]struct{}{}
	}
	s.waiting.objects[waitingObject{r, req}] = struct{}{}
	select {
	case s.waiting.kick <- struct{}{}:
	default:
	}
}

// watched reports whether watch runs: whether a waiting object is
// requeued when the sidecar is back.
func (s *sidecarState) watched() bool {
	s.waiting.mu.Lock()
	defer s.waiting.mu.Unlock()
	return s.waiting.running
}

// wakeAll requeues every waiting object.
func (s *sidecarState) wakeAll() {
	s.waiting.mu.Lock()
	objects := s.waiting.objects
	s.waiting.objects = nil
	s.waiting.mu.Unlock()
	for o := range objects {
		o.r.queue.add(o.req)
	}
}

// watch asks serving, while objects wait for the sidecar, every
// checkInterval whether it is back; when it is, it marks it up and requeues
// them all. It runs until ctx is done, as a runnable of the manager (see
// Setup).
func (s *sidecarState) watch(ctx context.Context, log logr.Logger, serving func(context.Context) error) {
	kick := make(chan struct{}, 1)
	s.waiting.mu.Lock()
	s.waiting.kick = kick
	s.waiting.running = true
	s.waiting.mu.Unlock()
	defer func() {
		s.waiting.mu.Lock()
		s.waiting.running = false
		s.waiting.mu.Unlock()
	}()
	tick := time.NewTicker(checkInterval)
	defer tick.Stop()
	for {
		s.waiting.mu.Lock()
		idle := len(s.waiting.objects) == 0
		s.waiting.mu.Unlock()
		if idle {
			select {
			case <-ctx.Done():
				return
			case <-kick:
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if serving(ctx) == nil {
			s.markUp(log)
			s.wakeAll()
		}
	}
}

// watcher is the runnable that runs watch: on every replica, since
// controllers may run on every replica.
type watcher struct {
	state   *sidecarState
	log     logr.Logger
	serving func(context.Context) error
}

func (w watcher) Start(ctx context.Context) error {
	w.state.watch(ctx, w.log, w.serving)
	return nil
}

func (watcher) NeedLeaderElection() bool { return false }
