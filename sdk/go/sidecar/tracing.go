package sidecar

import (
	"context"
	"net"

	"github.com/go-logr/logr"
	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc/filters"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/reflection"
	"google.golang.org/protobuf/types/known/durationpb"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	polyopv1alpha1 "github.com/polyop/polyop/sdk/go/gen/polyop/v1alpha1"
	"github.com/polyop/polyop/sdk/go/tracing"
)

// setUpTracing returns the tracer provider the Server traces its calls with,
// and a shutdown that flushes it: Options.TracerProvider, else the one the
// OTEL_* environment variables configure (set as the global one; see package
// tracing), else nil, when tracing is off.
func (s *Server) setUpTracing(ctx context.Context) (trace.TracerProvider, func(context.Context) error, error) {
	if s.opts.TracerProvider != nil {
		return s.opts.TracerProvider, func(context.Context) error { return nil }, nil
	}
	enabled, shutdown, err := tracing.Setup(ctx, tracing.Options{ServiceName: s.opts.Name})
	if err != nil || !enabled {
		return nil, shutdown, err
	}
	s.log.Info("Tracing calls: exporting spans as the OTEL_* environment variables say")
	return otel.GetTracerProvider(), shutdown, nil
}

// untraced are the calls that make no spans: health checks (the host makes
// one every few seconds), server reflection, and ReconcileStreams, which
// live as long as the host's connection: each call on one has a span of its
// own (see startStreamSpan).
var untraced = filters.None(filters.HealthCheck(), filters.ServicePrefix("grpc.reflection."), filters.MethodName("ReconcileStream"))

// tracedServer is the server option that continues the host's trace in every
// call: the handler's ctx holds a server span whose parent is the host's.
func tracedServer(tp trace.TracerProvider) grpc.ServerOption {
	return grpc.StatsHandler(otelgrpc.NewServerHandler(
		otelgrpc.WithTracerProvider(tp),
		otelgrpc.WithPropagators(tracing.Propagator()),
		otelgrpc.WithFilter(untraced),
	))
}

// tracedClient is the dial option that makes every Cluster service call a
// child span of the handler's, in the host's trace.
func tracedClient(tp trace.TracerProvider) grpc.DialOption {
	return grpc.WithStatsHandler(otelgrpc.NewClientHandler(
		otelgrpc.WithTracerProvider(tp),
		otelgrpc.WithPropagators(tracing.Propagator()),
	))
}

// withCallLogger gives ctx log, with the trace and span IDs and the reconcile
// ID of the call when it has them, as log.FromContext returns it.
func withCallLogger(ctx context.Context, log logr.Logger) context.Context {
	if id := tracing.ReconcileIDFromContext(ctx); id != "" {
		log = log.WithValues("reconcileID", id)
	}
	if kv := tracing.LogValues(ctx); kv != nil {
		log = log.WithValues(kv...)
	}
	return logf.IntoContext(ctx, log)
}

// annotateSpan sets the polyop.* attributes of req on the call's span, as
// the host sets them on its own: controller, kind, namespace, name, retries
// and the reconcile ID. Nothing when tracing is off.
func annotateSpan(ctx context.Context, req Request) {
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() {
		return
	}
	span.SetAttributes(
		tracing.Controller.String(req.Controller),
		tracing.Kind.String(req.Kind.Kind),
		tracing.Namespace.String(req.Namespace),
		tracing.Name.String(req.Name),
		tracing.Retries.Int(req.Retries),
	)
	if id := tracing.ReconcileIDFromContext(ctx); id != "" {
		span.SetAttributes(tracing.ReconcileID.String(id))
	}
}

// answer is what a Reconcile or a Finalize response says of the call.
type answer interface {
	GetError() *polyopv1alpha1.Failure
	GetRequeueAfter() *durationpb.Duration
}

// recordResult sets polyop.result on the call's span from its answer:
// terminal_error, error, requeue or success (error also for a call that
// failed as a gRPC error).
func recordResult(ctx context.Context, resp answer, err error) {
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() {
		return
	}
	result := tracing.ResultSuccess
	switch {
	case err != nil:
		result = tracing.ResultError
	case resp.GetError().GetTerminal():
		result = tracing.ResultTerminalError
	case resp.GetError() != nil:
		result = tracing.ResultError
	case resp.GetRequeueAfter().AsDuration() > 0:
		result = tracing.ResultRequeue
	}
	span.SetAttributes(attribute.String(string(tracing.Result), result))
}

// reflectionOn tells whether the Server serves gRPC server reflection on lis:
// Options.Reflection, else on a unix socket only.
func (s *Server) reflectionOn(lis net.Listener) bool {
	if s.opts.Reflection != nil {
		return *s.opts.Reflection
	}
	return lis.Addr().Network() == "unix"
}

func registerReflection(gs *grpc.Server) { reflection.Register(gs) }
