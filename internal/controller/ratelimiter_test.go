package controller

import (
	"testing"
	"time"
)

func TestRateLimiterAnswersRetryAfterAndStillCountsTheFailure(t *testing.T) {
	t.Parallel()
	l := newRateLimiter(&sidecarState{}, 0)
	for i := range 4 {
		l.retryAfter(req, 20*time.Millisecond)
		if got := l.When(req); got != 20*time.Millisecond {
			t.Fatalf("failure %d with retry_after 20ms: When = %s, want 20ms", i+1, got)
		}
		if got := l.NumRequeues(req); got != i+1 {
			t.Fatalf("after failure %d: NumRequeues = %d, want %d", i+1, got, i+1)
		}
	}
	// The fifth failure in a row, without retry_after: 5ms doubled four
	// times, as if every failure before it had used the backoff.
	if got := l.When(req); got != 80*time.Millisecond {
		t.Errorf("a failure without retry_after after four with: When = %s, want 80ms", got)
	}
	if got := l.When(req); got != 160*time.Millisecond {
		t.Errorf("the next failure: When = %s, want 160ms", got)
	}

	l.Forget(req)
	if got := l.NumRequeues(req); got != 0 {
		t.Errorf("after Forget: NumRequeues = %d, want 0", got)
	}
	l.retryAfter(req, time.Hour)
	l.Forget(req)
	if got := l.When(req); got != 5*time.Millisecond {
		t.Errorf("a retry_after that no requeue used outlived Forget: When = %s, want the backoff's 5ms", got)
	}
}

func TestRateLimiterRetryAfterIsPerKey(t *testing.T) {
	t.Parallel()
	l := newRateLimiter(&sidecarState{}, 0)
	other := req
	other.Name = "other"
	l.retryAfter(req, time.Minute)
	if got := l.When(other); got != 5*time.Millisecond {
		t.Errorf("another key: When = %s, want the backoff's 5ms", got)
	}
	if got := l.When(req); got != time.Minute {
		t.Errorf("the key: When = %s, want its retry_after", got)
	}
	if got := l.When(req); got != 10*time.Millisecond {
		t.Errorf("the key's next failure: When = %s, want 10ms (retry_after applies to one requeue)", got)
	}
}
