package controller

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	polyopv1alpha1 "github.com/polyop/polyop/sdk/go/gen/polyop/v1alpha1"
)

// These tests run the Reconciler in a controller-runtime controller, with
// its workqueue and the host's rate limiter, against a fake sidecar that
// answers a scripted row of answers and notes when each call came.

// timedCall is one Reconcile call the sidecar saw.
type timedCall struct {
	at      time.Time
	retries int32
}

// scriptedSidecar is a Sidecar that answers Reconcile with answers in turn,
// then with success, and Finalize with finalize.
type scriptedSidecar struct {
	mu       sync.Mutex
	answers  []*polyopv1alpha1.ReconcileResponse
	finalize *polyopv1alpha1.FinalizeResponse
	calls    []timedCall
}

func (s *scriptedSidecar) Reconcile(_ context.Context, req *polyopv1alpha1.ReconcileRequest) (*polyopv1alpha1.ReconcileResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := len(s.calls)
	s.calls = append(s.calls, timedCall{at: time.Now(), retries: req.GetRetries()})
	if n < len(s.answers) {
		return s.answers[n], nil
	}
	return &polyopv1alpha1.ReconcileResponse{}, nil
}

func (s *scriptedSidecar) Finalize(context.Context, *polyopv1alpha1.FinalizeRequest) (*polyopv1alpha1.FinalizeResponse, error) {
	return s.finalize, nil
}

func (s *scriptedSidecar) Address() string { return "fake" }

// waitForCalls waits until the sidecar saw n calls and returns them.
func (s *scriptedSidecar) waitForCalls(t *testing.T, n int) []timedCall {
	t.Helper()
	var calls []timedCall
	err := wait.PollUntilContextTimeout(t.Context(), 10*time.Millisecond, 60*time.Second, true, func(context.Context) (bool, error) {
		s.mu.Lock()
		defer s.mu.Unlock()
		calls = append([]timedCall(nil), s.calls...)
		return len(calls) >= n, nil
	})
	if err != nil {
		t.Fatalf("the sidecar saw %d calls, want %d: %v", len(calls), n, err)
	}
	return calls
}

// runController runs r in a controller named name, with the host's rate
// limiter, and enqueues req once.
func runController(t *testing.T, name string, r *Reconciler) {
	t.Helper()
	r.state = &sidecarState{}
	r.limiter = newRateLimiter(r.state, 0)
	c, err := controller.NewTypedUnmanaged(name, controller.TypedOptions[reconcile.Request]{
		Reconciler:         r,
		RateLimiter:        r.limiter,
		SkipNameValidation: ptr.To(true),
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Watch(source.Func(func(_ context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
		q.Add(req)
		return nil
	})); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("controller: %v", err)
		}
	})
}

func failure(message string, retryAfter time.Duration) *polyopv1alpha1.ReconcileResponse {
	f := &polyopv1alpha1.Failure{Message: message}
	if retryAfter > 0 {
		f.RetryAfter = durationpb.New(retryAfter)
	}
	return &polyopv1alpha1.ReconcileResponse{Error: f}
}

func TestAFailureWithRetryAfterIsRetriedThenAndStillCounts(t *testing.T) {
	t.Parallel()
	const name = "retry-after-2s"
	const retryAfter = 2 * time.Second
	s := &scriptedSidecar{answers: []*polyopv1alpha1.ReconcileResponse{failure("busy", retryAfter)}}
	r, _, _ := newFlow(t, "", s, ownerMap())
	rec := events.NewFakeRecorder(10)
	r.Recorder = rec
	runController(t, name, r)

	calls := s.waitForCalls(t, 2)
	if gap := calls[1].at.Sub(calls[0].at); gap < retryAfter {
		t.Errorf("the second call came %s after the first, before the retry_after of %s", gap, retryAfter)
	}
	if calls[0].retries != 0 || calls[1].retries != 1 {
		t.Errorf("retries %d then %d, want 0 then 1: a failure with retry_after still counts", calls[0].retries, calls[1].retries)
	}
	// controller-runtime counted the failure as an error.
	err := wait.PollUntilContextTimeout(t.Context(), 10*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		return reconcileErrors(t, name) == 1, nil
	})
	if err != nil {
		t.Errorf("controller_runtime_reconcile_errors_total = %v, want 1", reconcileErrors(t, name))
	}
	select {
	case e := <-rec.Events:
		if !strings.HasPrefix(e, "Warning "+ReasonReconcileFailed+" ") || !strings.Contains(e, "busy") {
			t.Errorf("event %q, want a Warning %s with the failure's message", e, ReasonReconcileFailed)
		}
	default:
		t.Errorf("no event recorded for the failure")
	}
}

func TestAFailureWithoutRetryAfterBacksOffAsIfTheWholeRowHad(t *testing.T) {
	t.Parallel()
	const retryAfter = 20 * time.Millisecond
	s := &scriptedSidecar{answers: []*polyopv1alpha1.ReconcileResponse{
		failure("busy", retryAfter), failure("busy", retryAfter), failure("busy", retryAfter), failure("busy", retryAfter),
		failure("broken", 0),
	}}
	r, _, _ := newFlow(t, "", s, ownerMap())
	runController(t, "retry-after-row", r)

	calls := s.waitForCalls(t, 6)
	for i, c := range calls {
		if c.retries != int32(i) {
			t.Errorf("call %d carried retries %d, want %d", i+1, c.retries, i)
		}
	}
	for i := 1; i <= 4; i++ {
		if gap := calls[i].at.Sub(calls[i-1].at); gap < retryAfter {
			t.Errorf("call %d came %s after call %d, before the retry_after of %s", i+1, gap, i, retryAfter)
		}
	}
	// The fifth failure in a row backs off 5ms doubled four times.
	if gap := calls[5].at.Sub(calls[4].at); gap < 80*time.Millisecond {
		t.Errorf("after the fifth failure in a row the sixth call came %s later, want the backoff of the fifth failure, 80ms", gap)
	}
}

// reconcileErrors reads controller_runtime_reconcile_errors_total of the
// controller name.
func reconcileErrors(t *testing.T, name string) float64 {
	t.Helper()
	families, err := metrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != "controller_runtime_reconcile_errors_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "controller" && l.GetValue() == name {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}

func TestFinalizeFailuresAreHandledAsReconcileFailures(t *testing.T) {
	t.Parallel()
	const finalizer = "example.com/cleanup"
	for name, tc := range map[string]struct {
		failure    *polyopv1alpha1.Failure
		retryAfter time.Duration
		reason     string
		wantErr    string
	}{
		"if Finalize fails with retry_after, the error carries it and a FinalizeFailed event the message": {
			failure: &polyopv1alpha1.Failure{Message: "still draining", RetryAfter: durationpb.New(3 * time.Second)}, retryAfter: 3 * time.Second,
			reason: ReasonFinalizeFailed, wantErr: "still draining (retry after 3s)",
		},
		"if Finalize fails terminal with retry_after, the answer is refused naming the contradiction": {
			failure: &polyopv1alpha1.Failure{Message: "m", Terminal: true, RetryAfter: durationpb.New(time.Second)},
			reason:  ReasonInvalidFailure, wantErr: `refused the Finalize answer of the sidecar at fake and wrote nothing: error is terminal (never retried) and has a retry_after of 1s`,
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			sc := &scriptedSidecar{finalize: &polyopv1alpha1.FinalizeResponse{Error: tc.failure}}
			owner := ownerMap()
			owner.Finalizers = []string{finalizer}
			now := metav1.Now()
			owner.DeletionTimestamp = &now
			r, _, _ := newFlow(t, finalizer, sc, owner)
			rec := events.NewFakeRecorder(10)
			r.Recorder = rec
			_, err := r.Reconcile(context.Background(), req)
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("error %v, want it to contain %q", err, tc.wantErr)
			}
			if errors.Is(err, reconcile.TerminalError(nil)) {
				t.Errorf("error %v is terminal, want it retried", err)
			}
			var f *sidecarFailure
			if got := time.Duration(0); errors.As(err, &f) && f.retryAfter != tc.retryAfter || !errors.As(err, &f) && tc.retryAfter != got {
				t.Errorf("error %#v, want a retry after %s", err, tc.retryAfter)
			}
			select {
			case e := <-rec.Events:
				if !strings.HasPrefix(e, "Warning "+tc.reason+" ") {
					t.Errorf("event %q, want a Warning %s", e, tc.reason)
				}
			default:
				t.Errorf("no event recorded")
			}
		})
	}
}
