package e2e

import (
	"context"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// TestAFailureWithRetryAfterIsRetriedThen has testsidecar children answer every
// Reconcile with a Failure whose retry_after is 1s: the host calls again after
// that second, not after its backoff (5 ms, doubling), and the failures still
// count in the retries each request carries.
func TestAFailureWithRetryAfterIsRetriedThen(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.startChildSidecar()
	f.startHost()
	const retryAfter = time.Second

	f.createWidget("w", map[string]any{"value": "v", "fail": "the database is busy", "failRetryAfter": retryAfter.String()})
	var calls []widgetCall
	err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, 2*time.Minute, true, func(context.Context) (bool, error) {
		calls = f.widgetCalls("w", "Reconcile")
		return len(calls) >= 4, nil
	})
	if err != nil {
		t.Fatalf("%d Reconcile calls, want 4: %v", len(calls), err)
	}
	// The first calls may follow the host's own writes (the finalizer, the
	// status) at once; from then on only the failures requeue the object.
	last, before := calls[len(calls)-1], calls[len(calls)-2]
	if gap := last.Time.Sub(before.Time); gap < retryAfter {
		t.Errorf("the last call came %s after the one before, before the retry_after of %s (calls %+v)", gap, retryAfter, calls)
	}
	if last.Retries != before.Retries+1 || last.Retries < 2 {
		t.Errorf("the last two calls carried retries %d and %d, want one more each failure (calls %+v)", before.Retries, last.Retries, calls)
	}
	f.waitWarning("w", "ReconcileFailed", "the database is busy")
}
