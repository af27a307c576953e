package sidecar_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	polyopv1alpha1 "github.com/polyop/polyop/gen/go/polyop/v1alpha1"
	"github.com/polyop/polyop/internal/sidecar"
	"github.com/polyop/polyop/internal/testenv"
)

// BenchmarkHopTypeScript measures the Reconcile hop to a sidecar written with
// the TypeScript SDK (testdata/hop_sidecar.mjs, run by node; see make
// node_modules) beside the same hop to the Go SDK, in the same run, for the
// same ~4 KB MaintenanceWindow and the same reconciler work, over unix
// sockets:
//
//   - go/reconcile: the Go SDK sidecar, in process (as in BenchmarkHop);
//   - typescript/reconcile: the TypeScript SDK sidecar, in its own process;
//   - typescript/health-check: a bare gRPC health check of the TypeScript
//     sidecar, the cost of node's HTTP/2 and Connect's gRPC server alone.
//
// Each sub-benchmark reports ns/op (the mean), p50-ns and p99-ns; the ratio
// of the p50s is the TypeScript hop's cost relative to Go's.
func BenchmarkHopTypeScript(b *testing.B) {
	err := testenv.BuildTypeScript("sdk/typescript")
	if errors.Is(err, testenv.ErrNoNode) {
		b.Skipf("cannot run the TypeScript sidecar: %v", err)
	}
	if err != nil {
		b.Fatal(err)
	}
	obj := windowOf4KB(b)

	_, goSidecar := dial(b, newExampleSidecar(b), "unix")
	tsConn, tsSidecar := startTypeScriptSidecar(b)
	health := healthpb.NewHealthClient(tsConn)

	reconcile := func(c *sidecar.Client) func(context.Context) error {
		return func(ctx context.Context) error {
			return hostSide(ctx, obj, func(ctx context.Context, req *polyopv1alpha1.ReconcileRequest) (*polyopv1alpha1.ReconcileResponse, error) {
				return c.Reconcile(ctx, req)
			})
		}
	}
	b.Run("go/reconcile", func(b *testing.B) { runHop(b, reconcile(goSidecar)) })
	b.Run("typescript/reconcile", func(b *testing.B) { runHop(b, reconcile(tsSidecar)) })
	b.Run("typescript/health-check", func(b *testing.B) {
		runHop(b, func(ctx context.Context) error {
			_, err := health.Check(ctx, &healthpb.HealthCheckRequest{})
			return err
		})
	})
}

// startTypeScriptSidecar runs testdata/hop_sidecar.mjs on a fresh unix socket
// and returns a raw connection and a host-side Client to it, once it is
// ready.
func startTypeScriptSidecar(b *testing.B) (*grpc.ClientConn, *sidecar.Client) {
	node, err := exec.LookPath("node")
	if err != nil {
		b.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "po-bench-")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = os.RemoveAll(dir) })
	address := "unix://" + filepath.Join(dir, "ts.sock")
	p, err := testenv.StartProcess(nil, "typescript-sidecar", node, filepath.Join("testdata", "hop_sidecar.mjs"), address)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(p.Stop)

	sc, err := sidecar.New(sidecar.Options{Address: address})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = sc.Close() })
	if err := sc.WaitReady(context.Background(), 60*time.Second, logr.Discard()); err != nil {
		b.Fatalf("the TypeScript sidecar is not ready: %v\n%s", err, p.Output())
	}
	target, _ := sidecar.Target(address)
	conn, err := grpc.NewClient(target, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = conn.Close() })
	return conn, sc
}
