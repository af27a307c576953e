package sidecar_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/polyop/polyop/internal/description"
	"github.com/polyop/polyop/internal/fakesidecar"
	"github.com/polyop/polyop/internal/sidecar"
	"github.com/polyop/polyop/internal/testenv"
	polyopv1alpha1 "github.com/polyop/polyop/sdk/go/gen/polyop/v1alpha1"
	sdk "github.com/polyop/polyop/sdk/go/sidecar"
	"github.com/polyop/polyop/sdk/go/tracing"
)

// streamSidecar is a Go SDK sidecar whose controller "configmaps" answers by
// the ConfigMap's name: "terminal" and "transient" fail so, "slow" waits for
// its context to end, reports it on cancelled and answers once the test
// ends, anything else succeeds with a status. It declares a finalizer.
type streamSidecar struct {
	cancelled chan error
	release   chan struct{}
	// held is sent to when a "held" ConfigMap's reconcile starts, which
	// then waits for hold to close.
	held, hold chan struct{}
	// spans records the sidecar's spans, when traced.
	spans *tracetest.SpanRecorder
	// reconcileIDs are the reconcile IDs the handler's context carried.
	mu           sync.Mutex
	reconcileIDs []string
}

func (s *streamSidecar) Reconcile(ctx context.Context, cm *corev1.ConfigMap) (sdk.Result, error) {
	s.mu.Lock()
	s.reconcileIDs = append(s.reconcileIDs, tracing.ReconcileIDFromContext(ctx))
	s.mu.Unlock()
	switch cm.Name {
	case "terminal":
		return sdk.Result{}, sdk.TerminalError(errors.New("this cannot work"))
	case "transient":
		return sdk.Result{}, errors.New("not yet")
	case "slow":
		<-ctx.Done()
		s.cancelled <- ctx.Err()
		<-s.release
		return sdk.Result{}, ctx.Err()
	case "held":
		s.held <- struct{}{}
		<-s.hold
	}
	cm.Data = map[string]string{"reconciled": "yes"}
	return sdk.Result{RequeueAfter: time.Minute}, nil
}

func (s *streamSidecar) Finalize(_ context.Context, cm *corev1.ConfigMap) (sdk.Result, error) {
	if cm.Name == "transient" {
		return sdk.Result{}, errors.New("not yet")
	}
	return sdk.Result{}, nil
}

// serveStreamSidecar serves a streamSidecar with opts on a fresh unix socket
// until the test ends, and returns it and its address.
func serveStreamSidecar(t *testing.T, opts sdk.Options) (*streamSidecar, string) {
	t.Helper()
	address := shortSocket(t)
	s, stop := startStreamSidecar(t, opts, address)
	t.Cleanup(stop)
	return s, address
}

// startStreamSidecar serves a new streamSidecar with opts at address until
// the returned stop is called, which waits for it to stop.
func startStreamSidecar(t *testing.T, opts sdk.Options, address string) (*streamSidecar, func()) {
	t.Helper()
	s := &streamSidecar{
		cancelled: make(chan error, 10), release: make(chan struct{}), spans: tracetest.NewSpanRecorder(),
		held: make(chan struct{}), hold: make(chan struct{}),
	}
	opts.Name = "streams"
	opts.Logger = testr.New(t)
	opts.TracerProvider = sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(s.spans))
	srv, err := sdk.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := sdk.NewControllerManagedBy[*corev1.ConfigMap](srv).Named("configmaps").WithFinalizer("example.com/cleanup").Complete(s); err != nil {
		t.Fatal(err)
	}
	lis, err := sdk.Listen(address)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.ServeListener(ctx, lis) }()
	return s, func() {
		close(s.release)
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Error(err)
			}
		case <-time.After(time.Minute):
			t.Error("the sidecar did not stop within a minute")
		}
	}
}

// shortSocket is the address of a unix socket in a fresh directory (not
// t.TempDir(): a socket's path is limited to about 100 bytes).
func shortSocket(t *testing.T) string {
	dir, err := os.MkdirTemp("", "po-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	return "unix://" + filepath.Join(dir, "s.sock")
}

// described returns a Client to address that has described the sidecar.
func described(t *testing.T, opts sidecar.Options) *sidecar.Client {
	t.Helper()
	c, err := sidecar.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	if _, err := c.Describe(context.Background(), "test"); err != nil {
		t.Fatal(err)
	}
	return c
}

func configMapRequest(t *testing.T, name string) *polyopv1alpha1.ReconcileRequest {
	cm := &corev1.ConfigMap{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, Finalizers: []string{"example.com/cleanup"}},
	}
	raw, err := utiljson.Marshal(cm)
	if err != nil {
		t.Fatal(err)
	}
	return &polyopv1alpha1.ReconcileRequest{
		Controller: "configmaps",
		Kind:       &polyopv1alpha1.GroupVersionKind{Version: "v1", Kind: "ConfigMap"},
		Key:        &polyopv1alpha1.ObjectKey{Namespace: "default", Name: name},
		Object:     raw,
	}
}

func finalizeRequest(t *testing.T, name string) *polyopv1alpha1.FinalizeRequest {
	r := configMapRequest(t, name)
	return &polyopv1alpha1.FinalizeRequest{Controller: r.Controller, Kind: r.Kind, Key: r.Key, Object: r.Object}
}

// answerBytes is what a call answered, deterministically encoded, or its
// status.
func answerBytes[Resp proto.Message](t *testing.T, resp Resp, err error) string {
	t.Helper()
	if err != nil {
		s := status.Convert(err)
		return fmt.Sprintf("error %s: %s", s.Code(), s.Message())
	}
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(resp)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestAStreamCallAnswersAsTheUnaryCall(t *testing.T) {
	t.Parallel()
	_, address := serveStreamSidecar(t, sdk.Options{})
	streams := described(t, sidecar.Options{Address: address})
	unary := described(t, sidecar.Options{Address: address, DisableStreams: true})
	if !streams.Streams() || unary.Streams() {
		t.Fatalf("Streams() = %v and %v with DisableStreams, want true and false", streams.Streams(), unary.Streams())
	}
	noName := configMapRequest(t, "x")
	noName.Key.Name = ""
	unknown := configMapRequest(t, "x")
	unknown.Controller = "nope"
	for name, req := range map[string]*polyopv1alpha1.ReconcileRequest{
		"if the reconcile succeeds, the answer is the same":                                   configMapRequest(t, "ok"),
		"if the reconciler fails terminally, the failure is in the same answer":               configMapRequest(t, "terminal"),
		"if the reconciler fails, the transient failure is in the same answer":                configMapRequest(t, "transient"),
		"if the request has no name, the call fails with the same INVALID_ARGUMENT":           noName,
		"if the controller is unknown, the call fails with the same NOT_FOUND":                unknown,
		"if the object does not decode, the call fails with the same error as the unary call": {Controller: "configmaps", Key: &polyopv1alpha1.ObjectKey{Name: "x"}, Object: []byte("{")},
	} {
		t.Run(name, func(t *testing.T) {
			resp, err := streams.Reconcile(context.Background(), req)
			got := answerBytes(t, resp, err)
			resp, err = unary.Reconcile(context.Background(), req)
			want := answerBytes(t, resp, err)
			if got != want {
				t.Errorf("on a stream: %q\nunary:       %q", got, want)
			}
		})
	}
	for name, req := range map[string]*polyopv1alpha1.FinalizeRequest{
		"if Finalize succeeds, the answer is the same":     finalizeRequest(t, "ok"),
		"if Finalize fails, the failure is the same":       finalizeRequest(t, "transient"),
		"if Finalize has no object, the error is the same": {Controller: "configmaps", Key: &polyopv1alpha1.ObjectKey{Name: "x"}},
	} {
		t.Run(name, func(t *testing.T) {
			resp, err := streams.Finalize(context.Background(), req)
			got := answerBytes(t, resp, err)
			resp, err = unary.Finalize(context.Background(), req)
			want := answerBytes(t, resp, err)
			if got != want {
				t.Errorf("on a stream: %q\nunary:       %q", got, want)
			}
		})
	}
	if !streams.Streams() || streams.OpenedStreams() != 1 || unary.OpenedStreams() != 0 {
		t.Errorf("streams opened = %d (still on: %v) and %d with DisableStreams, want 1 (on) and 0",
			streams.OpenedStreams(), streams.Streams(), unary.OpenedStreams())
	}
}

// The sidecar cancels the handler at the call's deadline; the host holds the
// stream until the answer comes, and calls another object on another stream.
func TestAStreamCallOverItsTimeoutIsCancelledInTheSidecarAndTheNextCallGoesOnAnotherStream(t *testing.T) {
	t.Parallel()
	s, address := serveStreamSidecar(t, sdk.Options{})
	c := described(t, sidecar.Options{Address: address, ReconcileTimeout: 500 * time.Millisecond})
	_, err := c.Reconcile(context.Background(), configMapRequest(t, "slow"))
	if status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("Reconcile of a slow object = %v, want DEADLINE_EXCEEDED", err)
	}
	select {
	case err := <-s.cancelled:
		if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
			t.Errorf("the handler's context ended with %v", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("the handler's context did not end")
	}
	resp, err := c.Reconcile(context.Background(), configMapRequest(t, "ok"))
	if err != nil || resp.GetError() != nil {
		t.Fatalf("the next Reconcile = %v, %v", resp, err)
	}
	if n := c.OpenedStreams(); n != 2 {
		t.Errorf("streams opened = %d, want 2: the held one carries no other call", n)
	}
}

func TestACallerCancellingAStreamCallGetsCanceled(t *testing.T) {
	t.Parallel()
	s, address := serveStreamSidecar(t, sdk.Options{})
	c := described(t, sidecar.Options{Address: address})
	ctx, cancel := context.WithCancel(context.Background())
	errs := make(chan error, 1)
	go func() {
		_, err := c.Reconcile(ctx, configMapRequest(t, "slow"))
		errs <- err
	}()
	// The handler is running once the sidecar has the call: cancel then.
	waitFor(t, func() bool { s.mu.Lock(); defer s.mu.Unlock(); return len(s.reconcileIDs) == 1 })
	cancel()
	if err := <-errs; status.Code(err) != codes.Canceled {
		t.Errorf("Reconcile = %v, want CANCELED", err)
	}
	if err := <-s.cancelled; !errors.Is(err, context.Canceled) {
		t.Errorf("the handler's context ended with %v, want canceled", err)
	}
}

// A call whose context has already ended is refused as a unary call would
// be, and leaves the idle stream to the next call.
func TestACallWithAnEndedContextSpendsNoStream(t *testing.T) {
	t.Parallel()
	_, address := serveStreamSidecar(t, sdk.Options{})
	c := described(t, sidecar.Options{Address: address})
	if _, err := c.Reconcile(context.Background(), configMapRequest(t, "ok")); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := c.Reconcile(ctx, configMapRequest(t, "ok")); status.Code(err) != codes.Canceled {
		t.Errorf("Reconcile with a cancelled context = %v, want CANCELED", err)
	}
	if _, err := c.Reconcile(context.Background(), configMapRequest(t, "ok")); err != nil {
		t.Fatal(err)
	}
	if n := c.OpenedStreams(); n != 1 {
		t.Errorf("streams opened = %d, want 1: the idle stream outlives a call that never started", n)
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	testenv.Eventually(t, time.Minute, "the condition", func() (bool, string) { return cond(), "not met" })
}

func TestConcurrentCallersShareAtMostOneStreamEach(t *testing.T) {
	t.Parallel()
	_, address := serveStreamSidecar(t, sdk.Options{})
	c := described(t, sidecar.Options{Address: address})
	const callers, calls = 8, 20
	var wg sync.WaitGroup
	var failed atomic.Int32
	for range callers {
		wg.Go(func() {
			for range calls {
				if resp, err := c.Reconcile(context.Background(), configMapRequest(t, "ok")); err != nil || resp.GetError() != nil {
					t.Errorf("Reconcile = %v, %v", resp, err)
					failed.Add(1)
				}
			}
		})
	}
	wg.Wait()
	if n := c.OpenedStreams(); n < 1 || n > callers {
		t.Errorf("%d callers opened %d streams, want between 1 and %d", callers, n, callers)
	}
	before := c.OpenedStreams()
	for range calls {
		if _, err := c.Reconcile(context.Background(), configMapRequest(t, "ok")); err != nil {
			t.Fatal(err)
		}
	}
	if n := c.OpenedStreams(); n != before {
		t.Errorf("one caller after them opened %d more streams, want none: an idle one is reused", n-before)
	}
}

func TestAStreamCallCarriesTheTraceContext(t *testing.T) {
	t.Parallel()
	s, address := serveStreamSidecar(t, sdk.Options{})
	hostSpans := tracetest.NewSpanRecorder()
	c := described(t, sidecar.Options{Address: address, TracerProvider: sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(hostSpans))})
	ctx, parent := sdktrace.NewTracerProvider().Tracer("test").Start(context.Background(), "reconcile")
	ctx = tracing.ContextWithReconcileID(ctx, "rid-1")
	if _, err := c.Reconcile(ctx, configMapRequest(t, "ok")); err != nil {
		t.Fatal(err)
	}
	parent.End()
	var client sdktrace.ReadOnlySpan
	for _, sp := range hostSpans.Ended() {
		if sp.Name() == "polyop.v1alpha1.SidecarService/Reconcile" && sp.SpanKind() == trace.SpanKindClient {
			client = sp
		}
	}
	if client == nil || client.Parent().SpanID() != parent.SpanContext().SpanID() {
		t.Fatalf("the host made no client span polyop.v1alpha1.SidecarService/Reconcile under the caller's: %v", hostSpans.Ended())
	}
	var server sdktrace.ReadOnlySpan
	for _, sp := range s.spans.Ended() {
		if sp.Name() == "polyop.v1alpha1.SidecarService/Reconcile" && sp.SpanKind() == trace.SpanKindServer {
			server = sp
		}
	}
	if server == nil || server.Parent().SpanID() != client.SpanContext().SpanID() || server.SpanContext().TraceID() != parent.SpanContext().TraceID() {
		t.Fatalf("the sidecar made no server span under the host's client span: %v", s.spans.Ended())
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.reconcileIDs) != 1 || s.reconcileIDs[0] != "rid-1" {
		t.Errorf("the handler got reconcile IDs %q, want rid-1 from the baggage", s.reconcileIDs)
	}
}

func TestASidecarWithoutStreamsIsCalledUnary(t *testing.T) {
	t.Parallel()
	t.Run("if the sidecar does not announce streams, the host calls unary", func(t *testing.T) {
		t.Parallel()
		_, address := serveStreamSidecar(t, sdk.Options{ReconcileStream: new(false)})
		c := described(t, sidecar.Options{Address: address})
		if resp, err := c.Reconcile(context.Background(), configMapRequest(t, "ok")); err != nil || resp.GetError() != nil {
			t.Fatalf("Reconcile = %v, %v", resp, err)
		}
		if c.Streams() || c.OpenedStreams() != 0 {
			t.Errorf("Streams() = %v, %d opened; want unary calls only", c.Streams(), c.OpenedStreams())
		}
	})
	t.Run("if opening a stream fails with UNIMPLEMENTED, the call and the next go unary", func(t *testing.T) {
		t.Parallel()
		fake := &fakesidecar.Fake{
			OnDescribe: func(context.Context, *polyopv1alpha1.DescribeRequest) (*polyopv1alpha1.DescribeResponse, error) {
				return streamingDescription(), nil
			},
			OnReconcile: fakesidecar.Answer(func(*polyopv1alpha1.ReconcileRequest) *polyopv1alpha1.ReconcileResponse {
				return &polyopv1alpha1.ReconcileResponse{Status: []byte(`{"ok":true}`)}
			}),
		}
		address, _ := fakesidecar.Serve(t, fake)
		c := described(t, sidecar.Options{Address: address})
		for i := range 2 {
			resp, err := c.Reconcile(context.Background(), configMapRequest(t, "ok"))
			if err != nil || string(resp.GetStatus()) != `{"ok":true}` {
				t.Fatalf("Reconcile %d = %v, %v", i, resp, err)
			}
		}
		if c.Streams() || c.OpenedStreams() != 1 || len(fake.Reconciles()) != 2 {
			t.Errorf("Streams() = %v, %d opened, %d unary calls; want off for good after one attempt, two unary calls",
				c.Streams(), c.OpenedStreams(), len(fake.Reconciles()))
		}
	})
}

func streamingDescription() *polyopv1alpha1.DescribeResponse {
	return &polyopv1alpha1.DescribeResponse{
		ProtocolVersion: description.ProtocolVersion,
		Name:            "s",
		Controllers: []*polyopv1alpha1.ControllerDescription{{
			Name: "configmaps", ForKind: &polyopv1alpha1.GroupVersionKind{Version: "v1", Kind: "ConfigMap"},
		}},
		ReconcileStream: true,
	}
}

// scriptedStreams is a sidecar whose ReconcileStream answers its n-th call
// (from 1, over all its streams) with answer(n, request).
type scriptedStreams struct {
	polyopv1alpha1.UnimplementedSidecarServiceServer
	answer func(n int32, req *polyopv1alpha1.ReconcileStreamRequest) *polyopv1alpha1.ReconcileStreamResponse
	calls  atomic.Int32
}

func (s *scriptedStreams) Describe(context.Context, *polyopv1alpha1.DescribeRequest) (*polyopv1alpha1.DescribeResponse, error) {
	return streamingDescription(), nil
}

func (s *scriptedStreams) ReconcileStream(stream grpc.BidiStreamingServer[polyopv1alpha1.ReconcileStreamRequest, polyopv1alpha1.ReconcileStreamResponse]) error {
	for {
		req, err := stream.Recv()
		if err != nil {
			return nil
		}
		if err := stream.Send(s.answer(s.calls.Add(1), req)); err != nil {
			return err
		}
	}
}

// serveScripted serves a scriptedStreams with answer until the test ends,
// and returns a Client with opts that has described it.
func serveScripted(t *testing.T, opts sidecar.Options, answer func(int32, *polyopv1alpha1.ReconcileStreamRequest) *polyopv1alpha1.ReconcileStreamResponse) *sidecar.Client {
	t.Helper()
	address := shortSocket(t)
	lis, err := net.Listen("unix", strings.TrimPrefix(address, "unix://"))
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	polyopv1alpha1.RegisterSidecarServiceServer(srv, &scriptedStreams{answer: answer})
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	opts.Address = address
	return described(t, opts)
}

// statusAnswer answers req with a ReconcileResponse of status.
func statusAnswer(req *polyopv1alpha1.ReconcileStreamRequest, status string) *polyopv1alpha1.ReconcileStreamResponse {
	return &polyopv1alpha1.ReconcileStreamResponse{Id: req.GetId(), Result: &polyopv1alpha1.ReconcileStreamResponse_Reconcile{
		Reconcile: &polyopv1alpha1.ReconcileResponse{Status: []byte(status)},
	}}
}

// errorAnswer answers req with a CallStatus of code and message.
func errorAnswer(req *polyopv1alpha1.ReconcileStreamRequest, code codes.Code, message string) *polyopv1alpha1.ReconcileStreamResponse {
	return &polyopv1alpha1.ReconcileStreamResponse{Id: req.GetId(), Result: &polyopv1alpha1.ReconcileStreamResponse_Error{
		Error: &polyopv1alpha1.CallStatus{Code: int32(code), Message: message},
	}}
}

func TestAStreamAnswerIsBoundedAsAUnaryOne(t *testing.T) {
	t.Parallel()
	c := serveScripted(t, sidecar.Options{MaxObjectSize: 100}, func(_ int32, req *polyopv1alpha1.ReconcileStreamRequest) *polyopv1alpha1.ReconcileStreamResponse {
		return statusAnswer(req, `{"big":"`+strings.Repeat("x", 200)+`"}`)
	})
	resp, err := c.Reconcile(context.Background(), configMapRequest(t, "big"))
	var tooLarge *sidecar.TooLargeError
	if !errors.As(err, &tooLarge) || tooLarge.Field != "status" || resp == nil || resp.GetStatus() != nil {
		t.Errorf("Reconcile = %v, %v; want the answer without its status, and a TooLargeError for it", resp, err)
	}
}

func TestStreamCallsAreCountedAsUnaryCalls(t *testing.T) {
	t.Parallel()
	c := serveScripted(t, sidecar.Options{}, func(n int32, req *polyopv1alpha1.ReconcileStreamRequest) *polyopv1alpha1.ReconcileStreamResponse {
		if n == 2 {
			return errorAnswer(req, codes.NotFound, "no such controller")
		}
		return statusAnswer(req, "{}")
	})
	req := configMapRequest(t, "counted")
	req.Controller = "counted-on-a-stream"
	if _, err := c.Reconcile(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Reconcile(context.Background(), req); status.Code(err) != codes.NotFound || status.Convert(err).Message() != "no such controller" {
		t.Fatalf("Reconcile = %v, want NOT_FOUND no such controller", err)
	}
	families, err := ctrlmetrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			switch {
			case labels["method"] == "ReconcileStream":
				t.Errorf("%s counts the stream itself: %v", f.GetName(), labels)
			case f.GetName() == "polyop_sidecar_calls_total" && labels["controller"] == req.Controller:
				got[labels["method"]+"/"+labels["result"]] = m.GetCounter().GetValue()
			case f.GetName() == "polyop_sidecar_request_bytes" && labels["method"] == "Reconcile":
				got["request_bytes"] = float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	if got["Reconcile/success"] != 1 || got["Reconcile/transient_error"] != 1 || got["request_bytes"] < 2 {
		t.Errorf("metrics = %v, want one success and one transient error of Reconcile, and its request sizes", got)
	}
}

func TestAMalformedStreamAnswerIsAClearErrorAndTheNextCallWorks(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		bad  func(*polyopv1alpha1.ReconcileStreamRequest) *polyopv1alpha1.ReconcileStreamResponse
		want string
	}{
		"if the answer has another id, the error says which": {
			bad: func(req *polyopv1alpha1.ReconcileStreamRequest) *polyopv1alpha1.ReconcileStreamResponse {
				return &polyopv1alpha1.ReconcileStreamResponse{Id: req.GetId() + 7, Result: &polyopv1alpha1.ReconcileStreamResponse_Reconcile{}}
			},
			want: "it answers call 8, not call 1",
		},
		"if the answer has no result, the error says so": {
			bad: func(req *polyopv1alpha1.ReconcileStreamRequest) *polyopv1alpha1.ReconcileStreamResponse {
				return &polyopv1alpha1.ReconcileStreamResponse{Id: req.GetId()}
			},
			want: "it has no result",
		},
		"if the answer is of the other kind, the error names both": {
			bad: func(req *polyopv1alpha1.ReconcileStreamRequest) *polyopv1alpha1.ReconcileStreamResponse {
				return &polyopv1alpha1.ReconcileStreamResponse{Id: req.GetId(), Result: &polyopv1alpha1.ReconcileStreamResponse_Finalize{}}
			},
			want: "it answers with a FinalizeResponse, not a ReconcileResponse",
		},
		"if the CallStatus says OK, the error says so": {
			bad: func(req *polyopv1alpha1.ReconcileStreamRequest) *polyopv1alpha1.ReconcileStreamResponse {
				return &polyopv1alpha1.ReconcileStreamResponse{Id: req.GetId(), Result: &polyopv1alpha1.ReconcileStreamResponse_Error{Error: &polyopv1alpha1.CallStatus{}}}
			},
			want: "its CallStatus has code OK (0)",
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			c := serveScripted(t, sidecar.Options{}, func(n int32, req *polyopv1alpha1.ReconcileStreamRequest) *polyopv1alpha1.ReconcileStreamResponse {
				if n == 1 {
					return tc.bad(req)
				}
				return statusAnswer(req, "{}")
			})
			_, err := c.Reconcile(context.Background(), configMapRequest(t, "broken"))
			var malformed *sidecar.MalformedAnswerError
			if !errors.As(err, &malformed) || status.Code(err) != codes.Internal ||
				!containsAll(err.Error(), `controller "configmaps"`, "the Reconcile call for default/broken", "is malformed", tc.want) {
				t.Fatalf("Reconcile = %v, want a malformed answer error (INTERNAL) naming the controller, call and object, and saying %q", err, tc.want)
			}
			if resp, err := c.Reconcile(context.Background(), configMapRequest(t, "ok")); err != nil || string(resp.GetStatus()) != "{}" {
				t.Fatalf("the next Reconcile = %v, %v", resp, err)
			}
			if n := c.OpenedStreams(); n != 2 {
				t.Errorf("streams opened = %d, want 2: the one with the malformed answer is dropped", n)
			}
		})
	}
}

func containsAll(s string, subs ...string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}

func TestAfterTheSidecarRestartsTheNextCallGoesOnANewStream(t *testing.T) {
	t.Parallel()
	address := shortSocket(t)
	opts := sdk.Options{GracefulShutdownTimeout: time.Hour}
	s, stop := startStreamSidecar(t, opts, address)
	c := described(t, sidecar.Options{Address: address, MaxReconnectDelay: 100 * time.Millisecond})
	// Two calls at once, so that the host holds two idle streams after them.
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			if _, err := c.Reconcile(context.Background(), configMapRequest(t, "held")); err != nil {
				t.Error(err)
			}
		})
	}
	<-s.held
	<-s.held
	close(s.hold)
	wg.Wait()
	// The sidecar ends the idle streams when it stops, without waiting for
	// its graceful shutdown timeout.
	stop()
	_, stop = startStreamSidecar(t, opts, address)
	t.Cleanup(stop)
	waitFor(t, func() bool { return c.Check(nil) == nil })
	// The next call finds both dead streams, and goes on a new one.
	if resp, err := c.Reconcile(context.Background(), configMapRequest(t, "ok")); err != nil || resp.GetError() != nil {
		t.Fatalf("Reconcile after the restart = %v, %v", resp, err)
	}
	if n := c.OpenedStreams(); n != 3 {
		t.Errorf("streams opened = %d, want 3", n)
	}
}

func TestACallStatusUnimplementedIsAnAnswerNotAFallback(t *testing.T) {
	t.Parallel()
	c := serveScripted(t, sidecar.Options{}, func(n int32, req *polyopv1alpha1.ReconcileStreamRequest) *polyopv1alpha1.ReconcileStreamResponse {
		if n == 1 {
			return errorAnswer(req, codes.Unimplemented, "not for this kind")
		}
		return statusAnswer(req, "{}")
	})
	if _, err := c.Reconcile(context.Background(), configMapRequest(t, "a")); status.Code(err) != codes.Unimplemented {
		t.Fatalf("Reconcile = %v, want UNIMPLEMENTED", err)
	}
	if resp, err := c.Reconcile(context.Background(), configMapRequest(t, "b")); err != nil || string(resp.GetStatus()) != "{}" {
		t.Fatalf("the next Reconcile = %v, %v", resp, err)
	}
	if !c.Streams() || c.OpenedStreams() != 1 {
		t.Errorf("Streams() = %v, %d opened; want streams still on, the one stream reused", c.Streams(), c.OpenedStreams())
	}
}
