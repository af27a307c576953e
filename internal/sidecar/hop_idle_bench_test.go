package sidecar_test

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/polyop/polyop/internal/sidecar"
	"github.com/polyop/polyop/internal/testenv"
	polyopv1alpha1 "github.com/polyop/polyop/sdk/go/gen/polyop/v1alpha1"
	sdk "github.com/polyop/polyop/sdk/go/sidecar"
)

// hopSidecarEnv, set to a sidecar address, makes this test binary serve the
// example sidecar there (with the bare-unary and bare-stream baselines)
// instead of running tests: BenchmarkHopIdle's sidecar in a process of its
// own.
const hopSidecarEnv = "POLYOP_BENCH_HOP_SIDECAR"

func TestMain(m *testing.M) {
	if address := os.Getenv(hopSidecarEnv); address != "" {
		if err := serveHopSidecar(address); err != nil {
			fmt.Fprintln(os.Stderr, "hop sidecar:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// serveHopSidecar serves the example sidecar at address, with the bare-unary
// and bare-stream baselines, until SIGTERM or SIGINT.
func serveHopSidecar(address string) error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	// The bare-stream baseline's first answer is the sidecar's own Reconcile,
	// asked over its socket as the host asks it.
	target, err := sidecar.Target(address)
	if err != nil {
		return err
	}
	self, err := grpc.NewClient(target, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer func() { _ = self.Close() }()
	reconcile := func(ctx context.Context, req *polyopv1alpha1.ReconcileRequest) (*polyopv1alpha1.ReconcileResponse, error) {
		return polyopv1alpha1.NewSidecarServiceClient(self).Reconcile(ctx, req)
	}
	srv, err := exampleSidecar(sdk.Options{
		Logger:        logr.Discard(),
		ServerOptions: []grpc.ServerOption{bareUnary(), bareStream(reconcile)},
	})
	if err != nil {
		return err
	}
	lis, err := sdk.Listen(address)
	if err != nil {
		return err
	}
	return srv.ServeListener(ctx, lis)
}

// BenchmarkHopIdle measures the hop between two processes, as in a pod: the
// Go SDK sidecar of BenchmarkHop runs in a process of its own (this test
// binary, re-run), over a unix socket, and the calls are made back to back
// (idle-0) or with a pause between them (idle-2ms, untimed), as a host makes
// them between reconciles that do other work. After a pause the sidecar's
// threads are parked: every call wakes them, and the scheduler's latency to do
// so, on a loaded machine, is the tail a user sees (make bench measured a no-op
// reconcile's p99 +2.8 ms end to end). Its sub-benchmarks, in one run:
//
//   - reconcile: the host's Client and the SDK, as in BenchmarkHop, with a
//     unary call (--sidecar-streams=false);
//   - stream: the same on a ReconcileStream, as the host calls a sidecar
//     that announces streams;
//   - bare-unary: BenchmarkHop's baseline, a plain unary call of the same
//     bytes that the sidecar answers after decoding the object;
//   - bare-stream: the same messages on one long-lived bidirectional stream
//     (a stream per worker instead of a unary call per reconcile): no HTTP/2
//     headers or trailers per call, fewer frames and writes;
//   - bare-unary/unbuffered: bare-unary with the client's write buffer off
//     (grpc.WithWriteBufferSize(0)), each frame written as it is made;
//   - gomaxprocs-1/*: the same with the sidecar run with GOMAXPROCS=1, its
//     CPU limit in the manifests (500m) rounded up. Go 1.25+ does not set
//     that by itself: its default follows the container's CPU limit, rounded
//     up, but never below 2 on a machine with 2 CPUs or more.
//
// Each reports ns/op (the mean of the calls, pauses excluded), p50-ns and
// p99-ns. Run it with a fixed count of calls, for instance -benchtime 2000x.
func BenchmarkHopIdle(b *testing.B) {
	obj := windowOf4KB(b)
	for _, sidecarEnv := range []string{"", "GOMAXPROCS=1"} {
		prefix := ""
		if sidecarEnv != "" {
			prefix = "gomaxprocs-1/"
		}
		address := startHopSidecar(b, sidecarEnv)
		conn := rawConn(b, address)
		unbuffered := rawConn(b, address, grpc.WithWriteBufferSize(0))
		sc, err := sidecar.New(sidecar.Options{Address: address})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = sc.Close() })
		if err := sc.WaitReady(context.Background(), time.Minute, logr.Discard()); err != nil {
			b.Fatal(err)
		}
		streaming := describedClient(b, address)
		calls := []struct {
			name string
			op   func(context.Context) error
		}{
			{"reconcile", func(ctx context.Context) error {
				return hostSide(ctx, obj, func(ctx context.Context, req *polyopv1alpha1.ReconcileRequest) (*polyopv1alpha1.ReconcileResponse, error) {
					return sc.Reconcile(ctx, req)
				})
			}},
			{"stream", func(ctx context.Context) error {
				return hostSide(ctx, obj, streaming.Reconcile)
			}},
			{"bare-unary", bareUnaryCall(b, obj, conn)},
			{"bare-stream", bareStreamCall(b, obj, conn)},
			{"bare-unary/unbuffered", bareUnaryCall(b, obj, unbuffered)},
		}
		for _, idle := range []time.Duration{0, 2 * time.Millisecond} {
			for _, c := range calls {
				b.Run(fmt.Sprintf("%sidle-%s/%s", prefix, shortDuration(idle), c.name), func(b *testing.B) {
					runPaced(b, idle, c.op)
				})
			}
		}
	}
}

// shortDuration is d as "0" or "2ms".
func shortDuration(d time.Duration) string {
	if d == 0 {
		return "0"
	}
	return d.String()
}

// runPaced runs op b.N times with idle between two calls, and reports the
// calls' mean as ns/op (the pauses left out), p50-ns and p99-ns.
func runPaced(b *testing.B, idle time.Duration, op func(context.Context) error) {
	ctx := context.Background()
	durations := make([]time.Duration, 0, b.N)
	var total time.Duration
	for range b.N {
		if idle > 0 {
			time.Sleep(idle)
		}
		start := time.Now()
		if err := op(ctx); err != nil {
			b.Fatal(err)
		}
		d := time.Since(start)
		total += d
		durations = append(durations, d)
	}
	slices.Sort(durations)
	b.ReportMetric(float64(total.Nanoseconds())/float64(b.N), "ns/op")
	b.ReportMetric(float64(durations[len(durations)/2].Nanoseconds()), "p50-ns")
	b.ReportMetric(float64(durations[len(durations)*99/100].Nanoseconds()), "p99-ns")
}

// startHopSidecar runs this test binary as the example sidecar (see
// TestMain) on a fresh unix socket, with env added to its environment, and
// returns the socket's address.
func startHopSidecar(b *testing.B, env ...string) string {
	address := socketAddress(b, "idle")
	env = slices.DeleteFunc(append(env, hopSidecarEnv+"="+address), func(s string) bool { return s == "" })
	p, err := testenv.StartProcessWith("hop-sidecar", os.Args[0], nil, testenv.ProcessOptions{Env: env})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(p.Stop)
	return address
}

// rawConn is a plain gRPC connection to address, closed when the benchmark
// ends.
func rawConn(b *testing.B, address string, opts ...grpc.DialOption) *grpc.ClientConn {
	target, err := sidecar.Target(address)
	if err != nil {
		b.Fatal(err)
	}
	conn, err := grpc.NewClient(target, append([]grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}, opts...)...)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = conn.Close() })
	return conn
}
