package sidecar_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	polyopv1alpha1 "github.com/polyop/polyop/sdk/go/gen/polyop/v1alpha1"
	"github.com/polyop/polyop/sdk/go/sidecar"
)

// serve serves srv on a fresh unix socket and returns a client connection and
// a function that stops the server and returns Serve's error.
func serve(t *testing.T, srv *sidecar.Server) (*grpc.ClientConn, func() error) {
	t.Helper()
	dir, err := os.MkdirTemp("", "polyop")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	address := "unix://" + filepath.Join(dir, "sidecar.sock")
	lis, err := sidecar.Listen(address)
	if err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan struct{})
	var serveErr error
	go func() {
		defer close(served)
		serveErr = srv.ServeListener(ctx, lis)
	}()
	stop := func() error {
		cancel()
		select {
		case <-served:
			return serveErr
		case <-time.After(time.Minute):
			t.Fatal("Serve did not return after its context was done")
			return nil
		}
	}
	// The server logs through the test until it has stopped: it must stop
	// before the test ends.
	t.Cleanup(func() { _ = stop() })

	conn, err := grpc.NewClient(address, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(64<<20), grpc.MaxCallSendMsgSize(64<<20)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })

	// Wait until the server serves, as the host does.
	checkCtx, checkCancel := context.WithTimeout(ctx, time.Minute)
	defer checkCancel()
	resp, err := healthpb.NewHealthClient(conn).Check(checkCtx, &healthpb.HealthCheckRequest{}, grpc.WaitForReady(true))
	if err != nil || resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("health check = %v, %v", resp, err)
	}
	return conn, stop
}

func TestServe(t *testing.T) {
	t.Parallel()
	srv, err := sidecar.New(sidecar.Options{Name: "test", MaxMessageSize: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	started, release := make(chan struct{}), make(chan struct{})
	var slowDone atomic.Bool
	if err := sidecar.NewControllerManagedBy[*appsv1.Deployment](srv).Complete(
		sidecar.ReconcilerFunc[*appsv1.Deployment](func(_ context.Context, d *appsv1.Deployment) (sidecar.Result, error) {
			if d.Name == "slow" {
				close(started)
				<-release
				defer slowDone.Store(true)
			}
			d.Status.ObservedGeneration = d.Generation
			return sidecar.Result{}, nil
		})); err != nil {
		t.Fatal(err)
	}
	conn, stop := serve(t, srv)
	ctx := t.Context()
	health := healthpb.NewHealthClient(conn)
	client := polyopv1alpha1.NewSidecarServiceClient(conn)

	// The health service reports SERVING; a Watch stays open until the end.
	watch, err := health.Watch(ctx, &healthpb.HealthCheckRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := watch.Recv(); err != nil || got.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("health = %v, %v; want SERVING", got, err)
	}

	describe, err := client.Describe(ctx, &polyopv1alpha1.DescribeRequest{ProtocolVersion: sidecar.ProtocolVersion})
	if err != nil || len(describe.GetControllers()) != 1 {
		t.Fatalf("Describe = %v, %v", describe, err)
	}

	resp, err := client.Reconcile(ctx, paddedDeploymentRequest(t, "web", 0))
	if err != nil || string(resp.GetStatus()) != `{"observedGeneration":3}` {
		t.Fatalf("Reconcile = %v, %v", resp, err)
	}

	// A message over Options.MaxMessageSize is refused.
	if _, err := client.Reconcile(ctx, paddedDeploymentRequest(t, "web", 2<<20)); status.Code(err) != codes.ResourceExhausted {
		t.Errorf("an oversized request: error = %v, want ResourceExhausted", err)
	}

	// Registering after serving fails.
	if err := sidecar.NewControllerManagedBy[*corev1.ConfigMap](srv).Complete(nopReconciler[*corev1.ConfigMap]{}); err == nil {
		t.Error("Complete after Serve succeeded")
	}

	// Stopping waits for the call in flight, then ends the health stream.
	slow := make(chan error, 1)
	go func() {
		_, err := client.Reconcile(ctx, paddedDeploymentRequest(t, "slow", 0))
		slow <- err
	}()
	<-started
	stopped := make(chan error, 1)
	callDoneAtStop := make(chan bool, 1)
	go func() {
		err := stop()
		callDoneAtStop <- slowDone.Load()
		stopped <- err
	}()
	if got, err := watch.Recv(); err != nil || got.GetStatus() != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Errorf("health after stop = %v, %v; want NOT_SERVING", got, err)
	}
	close(release)
	if err := <-slow; err != nil {
		t.Errorf("the call in flight failed: %v", err)
	}
	if !<-callDoneAtStop {
		t.Error("Serve returned while a call was in flight")
	}
	if err := <-stopped; err != nil {
		t.Errorf("Serve returned %v", err)
	}
}

func TestServeRefuses(t *testing.T) {
	t.Parallel()
	t.Run("if no controller is registered, then Serve fails", func(t *testing.T) {
		t.Parallel()
		err := newServer(t).Serve(t.Context(), "127.0.0.1:0")
		if err == nil || !strings.Contains(err.Error(), "no controllers") {
			t.Fatalf("error = %v", err)
		}
	})
	t.Run("if the server already serves, then Serve fails", func(t *testing.T) {
		t.Parallel()
		srv := newServer(t)
		if err := sidecar.NewControllerManagedBy[*appsv1.Deployment](srv).Complete(nopReconciler[*appsv1.Deployment]{}); err != nil {
			t.Fatal(err)
		}
		_, stop := serve(t, srv)
		defer func() { _ = stop() }()
		if err := srv.Serve(t.Context(), "127.0.0.1:0"); err == nil || !strings.Contains(err.Error(), "already serving") {
			t.Fatalf("error = %v", err)
		}
	})
	t.Run("if the address is invalid, then Serve fails", func(t *testing.T) {
		t.Parallel()
		if err := newServer(t).Serve(t.Context(), "http://x"); err == nil {
			t.Fatal("Serve succeeded")
		}
	})
}
