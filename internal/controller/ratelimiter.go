package controller

import (
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// sidecarState is shared by every controller of a host: whether the last call
// to the sidecar found it unreachable, and the objects waiting for it to be
// back (see settle).
type sidecarState struct {
	down    atomic.Bool
	waiting waiting
}

// rateLimiter is controller-runtime's default controller rate limiter, with
// three additions: the reconciler reads NumRequeues to tell the sidecar how
// often a key has been retried; while the sidecar is down no key backs off for
// longer than downCap, so that nothing waits for minutes after a short outage;
// and a failure whose sidecar said when to retry (Failure.retry_after) is
// retried then instead, while it still counts in the key's backoff.
type rateLimiter struct {
	workqueue.TypedRateLimiter[reconcile.Request]
	state   *sidecarState
	downCap time.Duration

	mu sync.Mutex
	// retryAfters are the delays the next When answers, by key.
	retryAfters map[reconcile.Request]time.Duration
	// kept are the keys whose next Forget leaves their backoff as it is:
	// their reconcile did not fail, but did not succeed either (see
	// settle).
	kept map[reconcile.Request]struct{}
}

func newRateLimiter(state *sidecarState, downCap time.Duration) *rateLimiter {
	return &rateLimiter{
		TypedRateLimiter: workqueue.DefaultTypedControllerRateLimiter[reconcile.Request](),
		state:            state,
		downCap:          downCap,
	}
}

// When returns how long to wait before item's next attempt: the retry_after
// of its failure when the sidecar said one, otherwise its backoff. Either way
// the failure counts: NumRequeues grows by one, and a later failure without
// retry_after backs off as if every failure in the row had.
func (l *rateLimiter) When(item reconcile.Request) time.Duration {
	d := l.TypedRateLimiter.When(item)
	if after, ok := l.takeRetryAfter(item); ok {
		return after
	}
	if l.downCap > 0 && d > l.downCap && l.state.down.Load() {
		return l.downCap
	}
	return d
}

// Forget resets item's backoff, and drops a retry_after that no requeue used;
// unless item is kept, which it unkeeps.
func (l *rateLimiter) Forget(item reconcile.Request) {
	l.mu.Lock()
	_, kept := l.kept[item]
	delete(l.kept, item)
	l.mu.Unlock()
	if kept {
		return
	}
	l.takeRetryAfter(item)
	l.TypedRateLimiter.Forget(item)
}

// keep makes the next Forget of item leave its backoff, and so the retries
// its next call carries, as they are.
func (l *rateLimiter) keep(item reconcile.Request) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.kept == nil {
		l.kept = map[reconcile.Request]struct{}{}
	}
	l.kept[item] = struct{}{}
}

// retryAfter makes the next When of item answer d.
func (l *rateLimiter) retryAfter(item reconcile.Request, d time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.retryAfters == nil {
		l.retryAfters = map[reconcile.Request]time.Duration{}
	}
	l.retryAfters[item] = d
}

func (l *rateLimiter) takeRetryAfter(item reconcile.Request) (time.Duration, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	d, ok := l.retryAfters[item]
	delete(l.retryAfters, item)
	return d, ok
}
