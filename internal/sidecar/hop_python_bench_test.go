package sidecar_test

import (
	"context"
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

// BenchmarkHopPython measures the Reconcile hop to a sidecar written with the
// Python SDK (testdata/hop_sidecar.py, run by the virtualenv's Python, see
// make .venv) beside the same hop to the Go SDK, in the same run, for the same
// ~4 KB MaintenanceWindow and the same reconciler work, over unix sockets:
//
//   - go/reconcile: the Go SDK sidecar, in process (as in BenchmarkHop);
//   - python/reconcile: the Python SDK sidecar, in its own process;
//   - python/health-check: a bare gRPC health check of the Python sidecar,
//     the cost of Python's gRPC server alone.
//
// Each sub-benchmark reports ns/op (the mean), p50-ns and p99-ns; the ratio
// of the p50s is the Python hop's cost relative to Go's.
func BenchmarkHopPython(b *testing.B) {
	py := filepath.Join(testenv.RepoRoot(), ".venv", "bin", "python")
	if out, err := exec.Command(py, "-c", "import polyop").CombinedOutput(); err != nil {
		b.Skipf("no Python virtualenv with the polyop SDK (run make .venv): %v\n%s", err, out)
	}
	obj := windowOf4KB(b)

	_, goSidecar := dial(b, newExampleSidecar(b), "unix")
	pyConn, pySidecar := startPythonSidecar(b, py)
	health := healthpb.NewHealthClient(pyConn)

	reconcile := func(c *sidecar.Client) func(context.Context) error {
		return func(ctx context.Context) error {
			return hostSide(ctx, obj, func(ctx context.Context, req *polyopv1alpha1.ReconcileRequest) (*polyopv1alpha1.ReconcileResponse, error) {
				return c.Reconcile(ctx, req)
			})
		}
	}
	b.Run("go/reconcile", func(b *testing.B) { runHop(b, reconcile(goSidecar)) })
	b.Run("python/reconcile", func(b *testing.B) { runHop(b, reconcile(pySidecar)) })
	b.Run("python/health-check", func(b *testing.B) {
		runHop(b, func(ctx context.Context) error {
			_, err := health.Check(ctx, &healthpb.HealthCheckRequest{})
			return err
		})
	})
}

// startPythonSidecar runs testdata/hop_sidecar.py on a fresh unix socket and
// returns a raw connection and a host-side Client to it, once it is ready.
func startPythonSidecar(b *testing.B, py string) (*grpc.ClientConn, *sidecar.Client) {
	dir, err := os.MkdirTemp("", "po-bench-")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = os.RemoveAll(dir) })
	address := "unix://" + filepath.Join(dir, "py.sock")
	p, err := testenv.StartProcess(nil, "python-sidecar", py, filepath.Join("testdata", "hop_sidecar.py"), address)
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
		b.Fatalf("the Python sidecar is not ready: %v\n%s", err, p.Output())
	}
	target, _ := sidecar.Target(address)
	conn, err := grpc.NewClient(target, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = conn.Close() })
	return conn, sc
}
