package sidecar_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	appsv1 "k8s.io/api/apps/v1"

	polyopv1alpha1 "github.com/polyop/polyop/sdk/go/gen/polyop/v1alpha1"
	"github.com/polyop/polyop/sdk/go/sidecar"
)

// streamServer serves a Server with opts whose Deployment controller
// reports each call's deadline on deadlines, and returns a client of it and
// the function that stops it.
func streamServer(t *testing.T, opts sidecar.Options) (polyopv1alpha1.SidecarServiceClient, chan time.Time, func() error) {
	t.Helper()
	opts.Name = "test"
	opts.Logger = testr.New(t)
	srv, err := sidecar.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	deadlines := make(chan time.Time, 100)
	if err := sidecar.NewControllerManagedBy[*appsv1.Deployment](srv).Complete(
		sidecar.ReconcilerFunc[*appsv1.Deployment](func(ctx context.Context, d *appsv1.Deployment) (sidecar.Result, error) {
			deadline, _ := ctx.Deadline()
			deadlines <- deadline
			d.Status.ObservedGeneration = d.Generation
			return sidecar.Result{}, nil
		})); err != nil {
		t.Fatal(err)
	}
	conn, serveStop := serve(t, srv)
	// Stopped once, by the test or when it ends: the Server logs to t.
	var once sync.Once
	var stopErr error
	stop := func() error {
		once.Do(func() { stopErr = serveStop() })
		return stopErr
	}
	t.Cleanup(func() { _ = stop() })
	return polyopv1alpha1.NewSidecarServiceClient(conn), deadlines, stop
}

func deploymentRequest(t *testing.T) *polyopv1alpha1.ReconcileRequest {
	return paddedDeploymentRequest(t, deployment(3).Name, 0)
}

// paddedDeploymentRequest is a Reconcile request of the "deployment"
// controller for deployment(3) named name, with an annotation of size bytes
// when size is not 0.
func paddedDeploymentRequest(t *testing.T, name string, size int) *polyopv1alpha1.ReconcileRequest {
	t.Helper()
	d := deployment(3)
	d.Name = name
	if size > 0 {
		d.Annotations = map[string]string{"padding": strings.Repeat("x", size)}
	}
	d.SetGroupVersionKind(deploymentGVK)
	data, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	return &polyopv1alpha1.ReconcileRequest{
		Controller: "deployment",
		Key:        &polyopv1alpha1.ObjectKey{Namespace: d.Namespace, Name: d.Name},
		Object:     data,
	}
}

func reconcileCall(id uint64, req *polyopv1alpha1.ReconcileRequest) *polyopv1alpha1.ReconcileStreamRequest {
	return &polyopv1alpha1.ReconcileStreamRequest{Id: id, Call: &polyopv1alpha1.ReconcileStreamRequest_Reconcile{Reconcile: req}}
}

func TestReconcileStream(t *testing.T) {
	t.Parallel()
	client, deadlines, _ := streamServer(t, sidecar.Options{})
	ctx := t.Context()

	describe, err := client.Describe(ctx, &polyopv1alpha1.DescribeRequest{ProtocolVersion: sidecar.ProtocolVersion})
	if err != nil || !describe.GetReconcileStream() {
		t.Fatalf("Describe = %v, %v; want reconcile_stream set", describe, err)
	}
	stream, err := client.ReconcileStream(ctx)
	if err != nil {
		t.Fatal(err)
	}
	call := func(req *polyopv1alpha1.ReconcileStreamRequest) *polyopv1alpha1.ReconcileStreamResponse {
		t.Helper()
		if err := stream.Send(req); err != nil {
			t.Fatal(err)
		}
		resp, err := stream.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if resp.GetId() != req.GetId() {
			t.Fatalf("the answer to call %d has id %d", req.GetId(), resp.GetId())
		}
		return resp
	}

	t.Log("A call answers as the unary call, and runs with the request's timeout as its deadline.")
	unary, err := client.Reconcile(ctx, deploymentRequest(t))
	if err != nil {
		t.Fatal(err)
	}
	<-deadlines
	req := reconcileCall(1, deploymentRequest(t))
	req.Timeout = durationpb.New(time.Hour)
	sent := time.Now()
	if got := call(req).GetReconcile(); !proto.Equal(got, unary) {
		t.Errorf("on the stream: %v; unary: %v", got, unary)
	}
	if d := <-deadlines; d.Before(sent.Add(59*time.Minute)) || d.After(time.Now().Add(time.Hour)) {
		t.Errorf("the handler's deadline is %s from the call, want an hour", d.Sub(sent))
	}

	t.Log("A call the unary call would fail is answered with its status, and the stream goes on.")
	unknown := deploymentRequest(t)
	unknown.Controller = "nope"
	_, unaryErr := client.Reconcile(ctx, unknown)
	got := call(reconcileCall(2, unknown)).GetError()
	if want := status.Convert(unaryErr); got.GetCode() != int32(codes.NotFound) || got.GetMessage() != want.Message() {
		t.Errorf("CallStatus = %v, want %s %q as unary", got, want.Code(), want.Message())
	}

	t.Log("A request without a call is refused with INVALID_ARGUMENT, and the stream goes on.")
	if got := call(&polyopv1alpha1.ReconcileStreamRequest{Id: 3}).GetError(); got.GetCode() != int32(codes.InvalidArgument) {
		t.Errorf("CallStatus = %v, want INVALID_ARGUMENT", got)
	}
	if got := call(reconcileCall(4, deploymentRequest(t))); got.GetReconcile() == nil {
		t.Errorf("after a refused call: %v", got)
	}
	<-deadlines

	t.Log("Many requests sent at once are answered in order.")
	const many = 50
	sendErr := make(chan error, 1)
	go func() {
		for id := range uint64(many) {
			if err := stream.Send(reconcileCall(100+id, deploymentRequest(t))); err != nil {
				sendErr <- err
				return
			}
		}
		sendErr <- nil
	}()
	for id := range uint64(many) {
		resp, err := stream.Recv()
		if err != nil || resp.GetId() != 100+id || resp.GetReconcile() == nil {
			t.Fatalf("answer %d = %v, %v; want a Reconcile answer to call %d", id, resp, err, 100+id)
		}
		<-deadlines
	}
	if err := <-sendErr; err != nil {
		t.Fatal(err)
	}
	if err := stream.CloseSend(); err != nil {
		t.Fatal(err)
	}
	if _, err := stream.Recv(); err == nil {
		t.Error("the stream goes on after the host closed it")
	}
}

func TestReconcileStreamOff(t *testing.T) {
	t.Parallel()
	client, _, _ := streamServer(t, sidecar.Options{ReconcileStream: new(false)})
	describe, err := client.Describe(t.Context(), &polyopv1alpha1.DescribeRequest{ProtocolVersion: sidecar.ProtocolVersion})
	if err != nil || describe.GetReconcileStream() {
		t.Fatalf("Describe = %v, %v; want reconcile_stream unset", describe, err)
	}
	stream, err := client.ReconcileStream(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	// The server may end the stream before the request is sent: Send then
	// returns io.EOF, and Recv the status.
	if err := stream.Send(reconcileCall(1, deploymentRequest(t))); err != nil && !errors.Is(err, io.EOF) {
		t.Fatal(err)
	}
	if _, err := stream.Recv(); status.Code(err) != codes.Unimplemented {
		t.Errorf("a stream opened anyway ends with %v, want UNIMPLEMENTED", err)
	}
}

func TestStoppingEndsIdleStreams(t *testing.T) {
	t.Parallel()
	client, deadlines, stop := streamServer(t, sidecar.Options{GracefulShutdownTimeout: time.Hour})
	stream, err := client.ReconcileStream(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(reconcileCall(1, deploymentRequest(t))); err != nil {
		t.Fatal(err)
	}
	if _, err := stream.Recv(); err != nil {
		t.Fatal(err)
	}
	<-deadlines
	// Serve waits for no idle stream: it would wait for an hour.
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if _, err := stream.Recv(); status.Code(err) != codes.Unavailable {
		t.Errorf("the idle stream ended with %v, want UNAVAILABLE", err)
	}
}

// A stream with a call in flight when the Server stops answers that call,
// then ends: the stop waits for the call, not for the graceful shutdown's
// timeout nor for the host's next call.
func TestStoppingEndsAStreamOnceItsCallInFlightIsAnswered(t *testing.T) {
	t.Parallel()
	srv, err := sidecar.New(sidecar.Options{Name: "test", Logger: testr.New(t), GracefulShutdownTimeout: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	entered, release := make(chan struct{}), make(chan struct{})
	if err := sidecar.NewControllerManagedBy[*appsv1.Deployment](srv).Complete(
		sidecar.ReconcilerFunc[*appsv1.Deployment](func(context.Context, *appsv1.Deployment) (sidecar.Result, error) {
			close(entered)
			<-release
			return sidecar.Result{}, nil
		})); err != nil {
		t.Fatal(err)
	}
	conn, stop := serve(t, srv)
	stream, err := polyopv1alpha1.NewSidecarServiceClient(conn).ReconcileStream(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(reconcileCall(1, deploymentRequest(t))); err != nil {
		t.Fatal(err)
	}
	<-entered
	stopped := make(chan error, 1)
	go func() { stopped <- stop() }()

	// The Server reports NOT_SERVING as it starts to stop, then refuses new
	// calls (the one in flight goes on): the call is released only then.
	health := healthpb.NewHealthClient(conn)
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(10 * time.Millisecond) {
		resp, err := health.Check(t.Context(), &healthpb.HealthCheckRequest{})
		if err != nil || resp.GetStatus() == healthpb.HealthCheckResponse_NOT_SERVING {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the stopping Server still reports %v", resp)
		}
	}
	close(release)

	if got, err := stream.Recv(); err != nil || got.GetId() != 1 || got.GetReconcile() == nil {
		t.Fatalf("the call in flight was answered %v, %v; want its answer", got, err)
	}
	if _, err := stream.Recv(); status.Code(err) != codes.Unavailable {
		t.Errorf("after its call, the stream ended with %v, want UNAVAILABLE", err)
	}
	select {
	case err := <-stopped:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(time.Minute):
		t.Fatal("the Server has not stopped a minute after the call in flight was answered")
	}
}

// A reconciler still running when its call's deadline passes sees its
// context end with DeadlineExceeded; the stream answers the call only once
// the reconciler has returned, with its answer, and goes on: the host holds
// the object until that answer, so an earlier one would let a second call for
// the object run beside the first.
func TestACallPastItsDeadlineIsAnsweredOnlyOnceItsReconcilerReturned(t *testing.T) {
	t.Parallel()
	srv, err := sidecar.New(sidecar.Options{Name: "test", Logger: testr.New(t)})
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu    sync.Mutex
		order []string
	)
	happened := func(what string) {
		mu.Lock()
		defer mu.Unlock()
		order = append(order, what)
	}
	ended := make(chan error, 1)    // the late reconciler's ctx.Err()
	answered := make(chan struct{}) // the test has read the late call's answer
	if err := sidecar.NewControllerManagedBy[*appsv1.Deployment](srv).Complete(
		sidecar.ReconcilerFunc[*appsv1.Deployment](func(ctx context.Context, d *appsv1.Deployment) (sidecar.Result, error) {
			if d.Name == "late" {
				<-ctx.Done()
				ended <- ctx.Err()
				// Past its deadline, the reconciler gives an answer sent too early a second to arrive.
				select {
				case <-answered:
				case <-time.After(time.Second):
				}
				happened("returned")
			}
			return sidecar.Result{RequeueAfter: 7 * time.Second}, nil
		})); err != nil {
		t.Fatal(err)
	}
	conn, _ := serve(t, srv)
	stream, err := polyopv1alpha1.NewSidecarServiceClient(conn).ReconcileStream(t.Context())
	if err != nil {
		t.Fatal(err)
	}

	late := reconcileCall(1, paddedDeploymentRequest(t, "late", 0))
	late.Timeout = durationpb.New(200 * time.Millisecond)
	if err := stream.Send(late); err != nil {
		t.Fatal(err)
	}
	resp, err := stream.Recv()
	if err != nil {
		t.Fatal(err)
	}
	happened("answered")
	close(answered)
	if err := <-ended; !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("the reconciler's context ended with %v, want context.DeadlineExceeded", err)
	}
	mu.Lock()
	if got := strings.Join(order, ", "); got != "returned, answered" {
		t.Errorf("the call was %s; want the reconciler to have returned before the answer came", got)
	}
	mu.Unlock()
	if resp.GetId() != 1 || resp.GetReconcile().GetRequeueAfter().AsDuration() != 7*time.Second {
		t.Errorf("the late call was answered %v; want the reconciler's answer", resp)
	}

	next := reconcileCall(2, paddedDeploymentRequest(t, "next", 0))
	next.Timeout = durationpb.New(time.Minute)
	if err := stream.Send(next); err != nil {
		t.Fatal(err)
	}
	if resp, err := stream.Recv(); err != nil || resp.GetId() != 2 || resp.GetReconcile() == nil {
		t.Errorf("the next call on the stream was answered %v, %v", resp, err)
	}
}

// A unary call's deadline reaches the reconciler as its context's: it ends
// when the deadline passes.
func TestAUnaryCallsDeadlineEndsTheReconcilersContext(t *testing.T) {
	t.Parallel()
	srv, err := sidecar.New(sidecar.Options{Name: "test", Logger: testr.New(t)})
	if err != nil {
		t.Fatal(err)
	}
	type seen struct {
		deadline time.Time
		err      error
	}
	ended := make(chan seen, 1)
	if err := sidecar.NewControllerManagedBy[*appsv1.Deployment](srv).Complete(
		sidecar.ReconcilerFunc[*appsv1.Deployment](func(ctx context.Context, _ *appsv1.Deployment) (sidecar.Result, error) {
			deadline, _ := ctx.Deadline()
			<-ctx.Done()
			ended <- seen{deadline, ctx.Err()}
			return sidecar.Result{}, ctx.Err()
		})); err != nil {
		t.Fatal(err)
	}
	conn, _ := serve(t, srv)
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	sent := time.Now()
	if _, err := polyopv1alpha1.NewSidecarServiceClient(conn).Reconcile(ctx, deploymentRequest(t)); status.Code(err) != codes.DeadlineExceeded {
		t.Errorf("the call ended with %v, want DEADLINE_EXCEEDED", err)
	}
	got := <-ended
	if got.deadline.IsZero() || got.deadline.After(sent.Add(time.Second)) {
		t.Errorf("the reconciler's deadline is %v, want about 200ms after %v", got.deadline, sent)
	}
	// The server's own timer, or the client's cancellation when it comes first.
	if !errors.Is(got.err, context.DeadlineExceeded) && !errors.Is(got.err, context.Canceled) {
		t.Errorf("the reconciler's context ended with %v", got.err)
	}
}
