package sidecar_test

import (
	"context"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"google.golang.org/grpc"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/polyop/polyop/internal/sidecar"
	"github.com/polyop/polyop/internal/testenv"
	polyopv1alpha1 "github.com/polyop/polyop/sdk/go/gen/polyop/v1alpha1"
)

// benchForeignHop measures the Reconcile hop to a sidecar in another language
// beside the same hop to the Go SDK, in the same run, for the same ~4 KB
// MaintenanceWindow and the same reconciler work, over unix sockets:
//
//   - go/reconcile: the Go SDK sidecar, in process (as in BenchmarkHop);
//   - <lang>/reconcile: the other sidecar, in its own process, started as
//     command followed by the socket's address;
//   - go/stream and <lang>/stream: the same calls on a ReconcileStream, as
//     the host makes them to a sidecar that announces streams (the unary
//     calls above are what --sidecar-streams=false makes);
//   - <lang>/health-check: a bare gRPC health check of the other sidecar, the
//     cost of its gRPC server alone.
//
// Each sub-benchmark reports ns/op (the mean), p50-ns and p99-ns; the ratio of
// the p50s is the other language's hop cost relative to Go's.
func benchForeignHop(b *testing.B, lang string, command ...string) {
	obj := windowOf4KB(b)
	_, goSidecar := dial(b, newExampleSidecar(b), "unix")
	conn, other := startForeignSidecar(b, lang, command...)
	health := healthpb.NewHealthClient(conn)

	reconcile := func(c *sidecar.Client) func(context.Context) error {
		return func(ctx context.Context) error {
			return hostSide(ctx, obj, func(ctx context.Context, req *polyopv1alpha1.ReconcileRequest) (*polyopv1alpha1.ReconcileResponse, error) {
				return c.Reconcile(ctx, req)
			})
		}
	}
	b.Run("go/reconcile", func(b *testing.B) { runHop(b, reconcile(goSidecar)) })
	b.Run(lang+"/reconcile", func(b *testing.B) { runHop(b, reconcile(other)) })
	b.Run("go/stream", func(b *testing.B) { runHop(b, reconcile(describedClient(b, goSidecar.Address()))) })
	b.Run(lang+"/stream", func(b *testing.B) { runHop(b, reconcile(describedClient(b, other.Address()))) })
	b.Run(lang+"/health-check", func(b *testing.B) {
		runHop(b, func(ctx context.Context) error {
			_, err := health.Check(ctx, &healthpb.HealthCheckRequest{})
			return err
		})
	})
}

// startForeignSidecar runs command with a fresh unix socket's address as its
// last argument and returns a raw connection and a host-side Client to it,
// once it is ready.
func startForeignSidecar(b *testing.B, lang string, command ...string) (*grpc.ClientConn, *sidecar.Client) {
	address := socketAddress(b, lang)
	p, err := testenv.StartProcess(nil, lang+"-sidecar", command[0], append(command[1:], address)...)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(p.Stop)

	conn, sc := connect(b, address)
	if err := sc.WaitReady(context.Background(), 60*time.Second, logr.Discard()); err != nil {
		b.Fatalf("the %s sidecar is not ready: %v\n%s", lang, err, p.Output())
	}
	return conn, sc
}
