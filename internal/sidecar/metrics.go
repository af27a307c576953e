package sidecar

import (
	"context"
	"path"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/status"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// callDuration measures every call the host makes to its sidecar, by method and
// gRPC status code, in controller-runtime's metrics registry (served on the
// host's metrics endpoint next to controller_runtime_reconcile_*).
var callDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
	Name: "polyop_sidecar_call_duration_seconds",
	Help: "Duration of gRPC calls from the polyop host to its sidecar, by method and status code.",
	Buckets: []float64{
		0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30,
	},
}, []string{"method", "code"})

func init() {
	metrics.Registry.MustRegister(callDuration)
}

func observeCall(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	start := time.Now()
	err := invoker(ctx, method, req, reply, cc, opts...)
	callDuration.WithLabelValues(path.Base(method), status.Code(err).String()).Observe(time.Since(start).Seconds())
	return err
}
