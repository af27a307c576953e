package controller

import (
	"sync/atomic"
	"time"

	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// sidecarState is shared by every controller of a host: whether the last call
// to the sidecar found it unreachable.
type sidecarState struct {
	down atomic.Bool
}

// rateLimiter is controller-runtime's default controller rate limiter, with two
// additions: the reconciler reads NumRequeues to tell the sidecar how often a
// key has been retried, and while the sidecar is down no key backs off for
// longer than downCap, so that nothing waits for minutes after a short outage.
type rateLimiter struct {
	workqueue.TypedRateLimiter[reconcile.Request]
	state   *sidecarState
	downCap time.Duration
}

func newRateLimiter(state *sidecarState, downCap time.Duration) *rateLimiter {
	return &rateLimiter{
		TypedRateLimiter: workqueue.DefaultTypedControllerRateLimiter[reconcile.Request](),
		state:            state,
		downCap:          downCap,
	}
}

// When returns how long to wait before item's next attempt.
func (l *rateLimiter) When(item reconcile.Request) time.Duration {
	d := l.TypedRateLimiter.When(item)
	if l.downCap > 0 && d > l.downCap && l.state.down.Load() {
		return l.downCap
	}
	return d
}
