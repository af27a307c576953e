// Package fakesidecar is the fake sidecar of the host's Go tests: one Fake
// whose answers a test sets call by call, which keeps every request it was
// sent. It stands in-process for the host's sidecar interfaces (those of
// packages controller, admission and conversion), and Serve serves it over
// gRPC, with a health service, on a real unix socket for the sidecar client.
//
// The end-to-end tests run real sidecar processes instead (test/testsidecar in
// its modes, and the SDK's examples).
package fakesidecar

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/protobuf/proto"

	polyopv1alpha1 "github.com/polyop/polyop/sdk/go/gen/polyop/v1alpha1"
)

// Fake is a sidecar whose answers are its On functions: a call whose function
// is nil is answered Unimplemented, as a sidecar that does not serve it
// would. It is safe for concurrent use.
type Fake struct {
	polyopv1alpha1.UnimplementedSidecarServiceServer

	OnDescribe  func(context.Context, *polyopv1alpha1.DescribeRequest) (*polyopv1alpha1.DescribeResponse, error)
	OnReconcile func(context.Context, *polyopv1alpha1.ReconcileRequest) (*polyopv1alpha1.ReconcileResponse, error)
	OnFinalize  func(context.Context, *polyopv1alpha1.FinalizeRequest) (*polyopv1alpha1.FinalizeResponse, error)
	OnDefault   func(context.Context, *polyopv1alpha1.DefaultRequest) (*polyopv1alpha1.DefaultResponse, error)
	OnValidate  func(context.Context, *polyopv1alpha1.ValidateRequest) (*polyopv1alpha1.ValidateResponse, error)
	OnConvert   func(context.Context, *polyopv1alpha1.ConvertRequest) (*polyopv1alpha1.ConvertResponse, error)

	// Addr is what Address returns. Defaults to "fake".
	Addr string

	mu       sync.Mutex
	requests []proto.Message
}

// Answer adapts a function of the request alone, which always answers, to an
// On function.
func Answer[Req, Resp any](answer func(Req) Resp) func(context.Context, Req) (Resp, error) {
	return func(_ context.Context, req Req) (Resp, error) { return answer(req), nil }
}

// Address is the sidecar's address, for the host's messages.
func (f *Fake) Address() string {
	if f.Addr == "" {
		return "fake"
	}
	return f.Addr
}

// Describe implements polyopv1alpha1.SidecarServiceServer.
func (f *Fake) Describe(ctx context.Context, req *polyopv1alpha1.DescribeRequest) (*polyopv1alpha1.DescribeResponse, error) {
	return call(f, ctx, req, f.OnDescribe, f.UnimplementedSidecarServiceServer.Describe)
}

// Reconcile implements polyopv1alpha1.SidecarServiceServer.
func (f *Fake) Reconcile(ctx context.Context, req *polyopv1alpha1.ReconcileRequest) (*polyopv1alpha1.ReconcileResponse, error) {
	return call(f, ctx, req, f.OnReconcile, f.UnimplementedSidecarServiceServer.Reconcile)
}

// Finalize implements polyopv1alpha1.SidecarServiceServer.
func (f *Fake) Finalize(ctx context.Context, req *polyopv1alpha1.FinalizeRequest) (*polyopv1alpha1.FinalizeResponse, error) {
	return call(f, ctx, req, f.OnFinalize, f.UnimplementedSidecarServiceServer.Finalize)
}

// Default implements polyopv1alpha1.SidecarServiceServer.
func (f *Fake) Default(ctx context.Context, req *polyopv1alpha1.DefaultRequest) (*polyopv1alpha1.DefaultResponse, error) {
	return call(f, ctx, req, f.OnDefault, f.UnimplementedSidecarServiceServer.Default)
}

// Validate implements polyopv1alpha1.SidecarServiceServer.
func (f *Fake) Validate(ctx context.Context, req *polyopv1alpha1.ValidateRequest) (*polyopv1alpha1.ValidateResponse, error) {
	return call(f, ctx, req, f.OnValidate, f.UnimplementedSidecarServiceServer.Validate)
}

// Convert implements polyopv1alpha1.SidecarServiceServer.
func (f *Fake) Convert(ctx context.Context, req *polyopv1alpha1.ConvertRequest) (*polyopv1alpha1.ConvertResponse, error) {
	return call(f, ctx, req, f.OnConvert, f.UnimplementedSidecarServiceServer.Convert)
}

// call records req and answers it with on, or unimplemented when on is nil.
func call[Req proto.Message, Resp any](f *Fake, ctx context.Context, req Req, on, unimplemented func(context.Context, Req) (Resp, error)) (Resp, error) {
	f.mu.Lock()
	f.requests = append(f.requests, req)
	f.mu.Unlock()
	if on == nil {
		return unimplemented(ctx, req)
	}
	return on(ctx, req)
}

// Calls is how many calls the Fake received, of every kind.
func (f *Fake) Calls() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.requests)
}

// Reconciles are the ReconcileRequests received, in order.
func (f *Fake) Reconciles() []*polyopv1alpha1.ReconcileRequest {
	return requests[*polyopv1alpha1.ReconcileRequest](f)
}

// Finalizes are the FinalizeRequests received, in order.
func (f *Fake) Finalizes() []*polyopv1alpha1.FinalizeRequest {
	return requests[*polyopv1alpha1.FinalizeRequest](f)
}

// Describes are the DescribeRequests received, in order.
func (f *Fake) Describes() []*polyopv1alpha1.DescribeRequest {
	return requests[*polyopv1alpha1.DescribeRequest](f)
}

func requests[Req proto.Message](f *Fake) []Req {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []Req
	for _, r := range f.requests {
		if r, ok := r.(Req); ok {
			out = append(out, r)
		}
	}
	return out
}

// Serve serves f, with a health service, on a fresh unix socket until the
// test ends, and returns its address (unix://…) and the health service, whose
// status the test sets. A nil f serves the health service alone.
func Serve(t testing.TB, f *Fake) (string, *health.Server) {
	t.Helper()
	// Not t.TempDir(): a unix socket's path is limited to about 100 bytes.
	dir, err := os.MkdirTemp("", "po-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	sock := filepath.Join(dir, "s.sock")
	srv, hs := ServeOn(t, sock, f)
	t.Cleanup(srv.Stop)
	return "unix://" + sock, hs
}

// ServeOn serves f, with a health service, on the unix socket sock, and
// returns the server, for a test that stops and starts a sidecar at one
// address. A nil f serves the health service alone.
func ServeOn(t testing.TB, sock string, f *Fake) (*grpc.Server, *health.Server) {
	t.Helper()
	_ = os.Remove(sock)
	lis, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	hs := health.NewServer()
	healthpb.RegisterHealthServer(srv, hs)
	if f != nil {
		polyopv1alpha1.RegisterSidecarServiceServer(srv, f)
	}
	go func() { _ = srv.Serve(lis) }()
	return srv, hs
}
