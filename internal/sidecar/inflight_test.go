package sidecar_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/polyop/polyop/internal/sidecar"
	polyopv1alpha1 "github.com/polyop/polyop/sdk/go/gen/polyop/v1alpha1"
	sdk "github.com/polyop/polyop/sdk/go/sidecar"
)

// slowStreams is a sidecar whose ReconcileStream answers an object named
// "late" only once the test sends on answerLate (as a handler that ignores
// its deadline would, a Python synchronous one say), ends the stream without
// an answer for "end" once the test sends on endStream, never answers
// "never" (until its stream is cancelled), and answers anything else at
// once. Every answer's status says which call of its object it answers.
type slowStreams struct {
	polyopv1alpha1.UnimplementedSidecarServiceServer
	answerLate chan struct{}
	endStream  chan struct{}
	// cancelled receives the name of each object whose stream the host
	// cancelled while the call was running.
	cancelled chan string

	mu    sync.Mutex
	calls map[string]int
	// running counts the calls of each object running now, and overlaps the
	// calls that began while another of their object ran.
	running  map[string]int
	overlaps int
}

func (s *slowStreams) Describe(context.Context, *polyopv1alpha1.DescribeRequest) (*polyopv1alpha1.DescribeResponse, error) {
	return streamingDescription(), nil
}

func (s *slowStreams) ReconcileStream(stream grpc.BidiStreamingServer[polyopv1alpha1.ReconcileStreamRequest, polyopv1alpha1.ReconcileStreamResponse]) error {
	for {
		req, err := stream.Recv()
		if err != nil {
			return nil
		}
		name := req.GetReconcile().GetKey().GetName()
		s.mu.Lock()
		s.calls[name]++
		n := s.calls[name]
		if s.running[name] > 0 {
			s.overlaps++
		}
		s.running[name]++
		s.mu.Unlock()
		done := func() {
			s.mu.Lock()
			s.running[name]--
			s.mu.Unlock()
		}
		switch name {
		case "late":
			<-s.answerLate
		case "end":
			<-s.endStream
			done()
			return status.Error(codes.Unavailable, "the sidecar went away")
		case "never":
			<-stream.Context().Done()
			done()
			s.cancelled <- name
			return nil
		}
		done()
		if err := stream.Send(statusAnswer(req, fmt.Sprintf(`{"call":%d}`, n))); err != nil {
			return err
		}
	}
}

func (s *slowStreams) callsOf(name string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls[name]
}

// serveSlowStreams serves a slowStreams until the test ends, and returns a
// Client with opts that has described it, and whose released channel
// receives each object the client releases.
func serveSlowStreams(t *testing.T, opts sidecar.Options) (*slowStreams, *sidecar.Client, chan string) {
	t.Helper()
	address := shortSocket(t)
	lis, err := net.Listen("unix", strings.TrimPrefix(address, "unix://"))
	if err != nil {
		t.Fatal(err)
	}
	s := &slowStreams{
		answerLate: make(chan struct{}), endStream: make(chan struct{}), cancelled: make(chan string, 10),
		calls: map[string]int{}, running: map[string]int{},
	}
	srv := grpc.NewServer()
	polyopv1alpha1.RegisterSidecarServiceServer(srv, s)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	opts.Address = address
	c := described(t, opts)
	released := make(chan string, 10)
	c.OnRelease("configmaps", func(namespace, name string) { released <- namespace + "/" + name })
	return s, c, released
}

// received waits up to a minute for a value on ch.
func received[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(time.Minute):
		t.Fatalf("%s: nothing within a minute", what)
	}
	var zero T
	return zero
}

func TestACallPastItsDeadlineHoldsItsObjectUntilTheLateAnswerWhichIsDiscarded(t *testing.T) {
	t.Parallel()
	s, c, released := serveSlowStreams(t, sidecar.Options{ReconcileTimeout: 300 * time.Millisecond})

	_, err := c.Reconcile(context.Background(), configMapRequest(t, "late"))
	var deadline *sidecar.DeadlineError
	if !errors.As(err, &deadline) || status.Code(err) != codes.DeadlineExceeded || !deadline.Held {
		t.Fatalf("Reconcile past its deadline = %v, want a held *DeadlineError with code DEADLINE_EXCEEDED", err)
	}
	for _, want := range []string{`"configmaps"`, "Reconcile call", "ConfigMap default/late", "300ms"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error %q does not say %s", err, want)
		}
	}
	if sidecar.IsUnavailable(err) {
		t.Errorf("IsUnavailable(%v) = true: one call's deadline is not the sidecar being down", err)
	}

	// While the sidecar still runs the call, no other call of the object
	// is made; other objects are called, on another stream.
	_, err = c.Reconcile(context.Background(), configMapRequest(t, "late"))
	if !sidecar.IsInFlight(err) || !strings.Contains(err.Error(), "ConfigMap default/late") {
		t.Fatalf("Reconcile of the held object = %v, want an *InFlightError naming it", err)
	}
	if resp, err := c.Reconcile(context.Background(), configMapRequest(t, "other")); err != nil || string(resp.GetStatus()) != `{"call":1}` {
		t.Fatalf("Reconcile of another object = %s, %v", resp.GetStatus(), err)
	}
	if n := s.callsOf("late"); n != 1 {
		t.Fatalf("the sidecar got %d calls of the held object, want 1", n)
	}

	s.answerLate <- struct{}{}
	if got := received(t, released, "the object is released once the late answer arrives"); got != "default/late" {
		t.Fatalf("released %q, want default/late", got)
	}
	// The next call is made, and answered with its own answer: the late
	// one was not taken for it.
	go func() { s.answerLate <- struct{}{} }()
	resp, err := c.Reconcile(context.Background(), configMapRequest(t, "late"))
	if err != nil || string(resp.GetStatus()) != `{"call":2}` {
		t.Fatalf("Reconcile after the release = %s, %v, want the answer to call 2", resp.GetStatus(), err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.overlaps != 0 {
		t.Errorf("%d calls of an object began while another of it ran", s.overlaps)
	}
	// The held stream carried the late answer whole: it went back to the
	// pool, and no third stream was needed.
	if n := c.OpenedStreams(); n != 2 {
		t.Errorf("streams opened = %d, want 2", n)
	}
}

func TestAHeldObjectIsReleasedWhenItsStreamEnds(t *testing.T) {
	t.Parallel()
	s, c, released := serveSlowStreams(t, sidecar.Options{ReconcileTimeout: 300 * time.Millisecond})
	req := configMapRequest(t, "end")
	if _, err := c.Reconcile(context.Background(), req); status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("Reconcile = %v, want DEADLINE_EXCEEDED", err)
	}
	if _, err := c.Reconcile(context.Background(), req); !sidecar.IsInFlight(err) {
		t.Fatalf("Reconcile of the held object = %v, want an *InFlightError", err)
	}
	close(s.endStream)
	if got := received(t, released, "the object is released once its stream ends"); got != "default/end" {
		t.Fatalf("released %q, want default/end", got)
	}
	if _, err := c.Reconcile(context.Background(), req); sidecar.IsInFlight(err) {
		t.Fatalf("Reconcile after the stream ended = %v: the object is still held", err)
	}
	if n := s.callsOf("end"); n != 2 {
		t.Errorf("the sidecar got %d calls, want 2", n)
	}
}

func TestAHeldCallIsCancelledAGracePeriodAfterItsDeadline(t *testing.T) {
	t.Parallel()
	const timeout = 300 * time.Millisecond
	s, c, released := serveSlowStreams(t, sidecar.Options{ReconcileTimeout: timeout})
	var logged lines
	ctx := logf.IntoContext(context.Background(), logged.logger())
	start := time.Now()
	if _, err := c.Reconcile(ctx, configMapRequest(t, "never")); status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("Reconcile = %v, want DEADLINE_EXCEEDED", err)
	}
	if got := received(t, s.cancelled, "the sidecar sees the stream cancelled"); got != "never" {
		t.Fatalf("cancelled %q", got)
	}
	received(t, released, "the object is released once its stream is cancelled")
	if took := time.Since(start); took < 2*timeout {
		t.Errorf("the call's stream was cancelled %s after it began, before its deadline and the grace period (%s each)", took, timeout)
	}
	line := logged.find("Cancelled the call's stream")
	for _, want := range []string{"error", c.Address(), `"configmaps"`, "Reconcile", "ConfigMap default/never"} {
		if !strings.Contains(line, want) {
			t.Errorf("the log line %q does not say %s", line, want)
		}
	}
	if _, err := c.Reconcile(context.Background(), configMapRequest(t, "never")); sidecar.IsInFlight(err) {
		t.Fatalf("Reconcile after the grace period = %v: the object is still held", err)
	}
}

func TestAUnaryCallPastItsDeadlineHoldsNothing(t *testing.T) {
	t.Parallel()
	_, address := serveStreamSidecar(t, sdk.Options{ReconcileStream: new(false)})
	c := described(t, sidecar.Options{Address: address, ReconcileTimeout: 300 * time.Millisecond})
	if c.Streams() {
		t.Fatal("the client calls on streams")
	}
	_, err := c.Reconcile(context.Background(), configMapRequest(t, "slow"))
	var deadline *sidecar.DeadlineError
	if !errors.As(err, &deadline) || deadline.Held || status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("Reconcile = %v, want a *DeadlineError, not held", err)
	}
	// gRPC ended the call: the next one is made.
	if _, err := c.Reconcile(context.Background(), configMapRequest(t, "ok")); err != nil {
		t.Fatal(err)
	}
}

func TestOnlyABrokenConnectionIsTheSidecarUnavailable(t *testing.T) {
	t.Parallel()
	c := serveScripted(t, sidecar.Options{}, func(_ int32, req *polyopv1alpha1.ReconcileStreamRequest) *polyopv1alpha1.ReconcileStreamResponse {
		return errorAnswer(req, codes.Unavailable, "my database is down")
	})
	_, err := c.Reconcile(context.Background(), configMapRequest(t, "x"))
	if status.Code(err) != codes.Unavailable || sidecar.IsUnavailable(err) {
		t.Errorf("an UNAVAILABLE the sidecar answered: code %s, IsUnavailable %v; want UNAVAILABLE, not the sidecar being unreachable",
			status.Code(err), sidecar.IsUnavailable(err))
	}
	if !sidecar.IsUnavailable(status.Error(codes.Unavailable, "connection refused")) {
		t.Error("a connection refused is not the sidecar being unreachable")
	}
	if sidecar.IsUnavailable(status.Error(codes.DeadlineExceeded, "context deadline exceeded")) {
		t.Error("one call's deadline is the sidecar being unreachable")
	}
}

// lines is a logger that keeps what it logs.
type lines struct {
	mu  sync.Mutex
	all []string
}

func (l *lines) logger() logr.Logger {
	return logr.New(&lineSink{l: l})
}

// find is the first line containing sub, or "".
func (l *lines) find(sub string) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, line := range l.all {
		if strings.Contains(line, sub) {
			return line
		}
	}
	return ""
}

type lineSink struct {
	l      *lines
	values []any
}

func (s *lineSink) Init(logr.RuntimeInfo)  {}
func (s *lineSink) Enabled(level int) bool { return true }
func (s *lineSink) Info(level int, msg string, kv ...any) {
	s.add(fmt.Sprintf("info %s %v", msg, append(s.values, kv...)))
}

func (s *lineSink) Error(err error, msg string, kv ...any) {
	s.add(fmt.Sprintf("error %s: %v %v", msg, err, append(s.values, kv...)))
}

func (s *lineSink) add(line string) {
	s.l.mu.Lock()
	defer s.l.mu.Unlock()
	s.l.all = append(s.l.all, line)
}

func (s *lineSink) WithValues(kv ...any) logr.LogSink {
	return &lineSink{l: s.l, values: append(append([]any{}, s.values...), kv...)}
}
func (s *lineSink) WithName(string) logr.LogSink { return s }
