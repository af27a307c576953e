package controller

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/polyop/polyop/internal/sidecar"
	"github.com/polyop/polyop/internal/testenv"
	polyopv1alpha1 "github.com/polyop/polyop/sdk/go/gen/polyop/v1alpha1"
)

// stepSidecar is a Sidecar whose answer to each Reconcile call is the
// next of its steps (then success), and which records the retries of each
// call it let through (an *sidecar.InFlightError is a call not made).
type stepSidecar struct {
	mu      sync.Mutex
	steps   []func() (*polyopv1alpha1.ReconcileResponse, error)
	retries []int32
	// attempts counts every Reconcile, made or not.
	attempts int
}

func (s *stepSidecar) Reconcile(_ context.Context, req *polyopv1alpha1.ReconcileRequest) (*polyopv1alpha1.ReconcileResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.attempts++
	step := func() (*polyopv1alpha1.ReconcileResponse, error) { return &polyopv1alpha1.ReconcileResponse{}, nil }
	if len(s.steps) > 0 {
		step, s.steps = s.steps[0], s.steps[1:]
	}
	resp, err := step()
	if !sidecar.IsInFlight(err) {
		s.retries = append(s.retries, req.GetRetries())
	}
	return resp, err
}

func (s *stepSidecar) Finalize(context.Context, *polyopv1alpha1.FinalizeRequest) (*polyopv1alpha1.FinalizeResponse, error) {
	return &polyopv1alpha1.FinalizeResponse{}, nil
}

func (s *stepSidecar) Address() string { return "fake" }

func (s *stepSidecar) state() (attempts int, retries []int32, stepsLeft int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.attempts, append([]int32(nil), s.retries...), len(s.steps)
}

// runHostController runs r as Setup runs it: in a controller with the host's
// rate limiter, that hands r its queue, and with the watch of the sidecar's
// health, which asks serving; it enqueues req once.
func runHostController(t *testing.T, name string, r *Reconciler, serving func(context.Context) error, log logr.Logger) {
	t.Helper()
	r.state = &sidecarState{}
	r.limiter = newRateLimiter(r.state, 0)
	c, err := controller.NewTypedUnmanaged(name, controller.TypedOptions[reconcile.Request]{
		Reconciler:         r,
		RateLimiter:        r.limiter,
		SkipNameValidation: ptr.To(true),
		LogConstructor:     func(*reconcile.Request) logr.Logger { return log },
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, src := range []source.Source{r.queue.source(), source.Func(func(_ context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
		q.Add(req)
		return nil
	})} {
		if err := c.Watch(src); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 2)
	go func() { done <- watcher{state: r.state, log: log, serving: serving}.Start(ctx) }()
	testenv.Eventually(t, time.Minute, "the watch runs", func() (bool, string) { return r.state.watched(), "" })
	go func() { done <- c.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		for range 2 {
			if err := <-done; err != nil {
				t.Errorf("controller: %v", err)
			}
		}
	})
}

func TestAnObjectInFlightIsCalledAgainWhenReleasedWithoutMoreBackoff(t *testing.T) {
	t.Parallel()
	inFlight := func() (*polyopv1alpha1.ReconcileResponse, error) {
		return nil, &sidecar.InFlightError{Method: "Reconcile", Controller: "maps", Object: "ConfigMap ns/o", Namespace: "ns", Name: "o"}
	}
	s := &stepSidecar{steps: []func() (*polyopv1alpha1.ReconcileResponse, error){
		func() (*polyopv1alpha1.ReconcileResponse, error) {
			return nil, &sidecar.DeadlineError{Method: "Reconcile", Controller: "maps", Object: "ConfigMap ns/o", Timeout: time.Second, Held: true}
		},
		inFlight,
	}}
	r, _, _ := newFlow(t, "", s, ownerMap())
	var logged lines
	runHostController(t, "in-flight", r, func(context.Context) error { return nil }, logged.logger(1))

	// The retry after the deadline finds the object in flight.
	testenv.Eventually(t, time.Minute, "a call is tried while the object is in flight", func() (bool, string) {
		attempts, _, _ := s.state()
		return attempts >= 2, ""
	})
	r.released("ns", "o")
	testenv.Eventually(t, time.Minute, "the object is called again once released", func() (bool, string) {
		_, retries, _ := s.state()
		return len(retries) >= 2, ""
	})
	_, retries, _ := s.state()
	if retries[0] != 0 || retries[1] != 1 {
		t.Errorf("the calls carried retries %v, want 0 then 1: the deadline counts once, the wait for the answer not at all", retries)
	}
	if r.state.down.Load() || logged.count("sidecar unreachable") > 0 {
		t.Errorf("one call's deadline marked the sidecar down:\n%s", strings.Join(logged.all, "\n"))
	}
}

func TestACallThatFoundTheSidecarGoneIsMadeWhenItIsBackAndKeepsTheObjectsBackoff(t *testing.T) {
	t.Parallel()
	var up atomic.Bool
	gone := func() (*polyopv1alpha1.ReconcileResponse, error) {
		return nil, status.Error(codes.Unavailable, "the sidecar ended the stream without answering the call")
	}
	s := &stepSidecar{steps: []func() (*polyopv1alpha1.ReconcileResponse, error){
		// The object's own failure: it counts.
		func() (*polyopv1alpha1.ReconcileResponse, error) { return failure("not yet", 0), nil },
		// The sidecar dies under the next calls: they do not.
		gone, gone, gone,
	}}
	r, _, _ := newFlow(t, "", s, ownerMap())
	var logged lines
	checks := atomic.Int32{}
	serving := func(context.Context) error {
		checks.Add(1)
		if up.Load() {
			return nil
		}
		return status.Error(codes.Unavailable, "connection refused")
	}
	runHostController(t, "sidecar-gone", r, serving, logged.logger(0))

	for want := 2; want <= 4; want++ {
		testenv.Eventually(t, time.Minute, "the object's call fails, and it waits for the sidecar", func() (bool, string) {
			_, retries, _ := s.state()
			return len(retries) >= want && checks.Load() > 0, ""
		})
		// Each call found the sidecar gone: the object waits until the
		// health check says it is back.
		up.Store(true)
		testenv.Eventually(t, time.Minute, "the object is called once the sidecar is back", func() (bool, string) {
			_, retries, _ := s.state()
			return len(retries) > want, ""
		})
		up.Store(false)
	}
	_, retries, _ := s.state()
	for i, want := range []int32{0, 1, 1, 1, 1} {
		if retries[i] != want {
			t.Fatalf("the calls carried retries %v, want [0 1 1 1 1]: the sidecar dying counts in no object's retries", retries)
		}
	}
	if n := logged.count("sidecar unreachable"); n == 0 {
		t.Errorf("the sidecar going away was not logged:\n%s", strings.Join(logged.all, "\n"))
	}
}

func TestACallPastItsDeadlineIsItsObjectsErrorNotTheSidecarDown(t *testing.T) {
	t.Parallel()
	s := &stepSidecar{steps: []func() (*polyopv1alpha1.ReconcileResponse, error){
		func() (*polyopv1alpha1.ReconcileResponse, error) {
			return nil, &sidecar.DeadlineError{Method: "Reconcile", Controller: "maps", Object: "ConfigMap ns/o", Timeout: 30 * time.Second, Held: true, Grace: 30 * time.Second}
		},
	}}
	r, _, _ := newFlow(t, "", s, ownerMap())
	var got lines
	log := logConstructor(got.logger(0), "maps", configMapGVK)(&req)
	_, err := r.Reconcile(logr.NewContext(context.Background(), log), req)
	if err == nil {
		t.Fatal("Reconcile succeeded")
	}
	log.Error(err, reconcilerErrorMessage)
	var deadline *sidecar.DeadlineError
	if !errors.As(err, &deadline) {
		t.Errorf("Reconcile = %v, want a *sidecar.DeadlineError", err)
	}
	if r.state.down.Load() || got.count("sidecar unreachable") > 0 {
		t.Errorf("one call's deadline marked the sidecar down:\n%s", strings.Join(got.all, "\n"))
	}
	line := ""
	for _, l := range got.all {
		if strings.Contains(l, reconcilerErrorMessage) {
			line = l
		}
	}
	for _, want := range []string{`"error"=`, "Reconcile call to the sidecar at fake", `controller \"maps\"`, "ConfigMap ns/o", "within its deadline (30s)", `"ConfigMap"={"name"="o" "namespace"="ns"}`} {
		if !strings.Contains(line, want) {
			t.Errorf("the error line %s does not contain %s", line, want)
		}
	}
	if strings.Contains(line, `"level"=1`) {
		t.Errorf("the error is logged at debug level: %s", line)
	}
}
