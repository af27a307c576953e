package sidecar

import (
	"context"
	"errors"
	"path"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/stats"
	"google.golang.org/grpc/status"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	polyopv1alpha1 "github.com/polyop/polyop/sdk/go/gen/polyop/v1alpha1"
)

// The metrics of the calls the host makes to its sidecar, in
// controller-runtime's metrics registry: served on the host's metrics
// endpoint next to controller_runtime_reconcile_* and workqueue_*, whose
// names stay as controller-runtime gives them. docs/observability.md lists
// them all.

// The results of a call, the result label of polyop_sidecar_calls_total.
const (
	// ResultSuccess: the sidecar answered, and its answer reports no
	// error. A webhook's denial is an answer: it is a success.
	ResultSuccess = "success"
	// ResultTransientError: the sidecar answered a Failure that is not
	// terminal (the object is retried), or failed the call with a gRPC status
	// of its own (an exception in its handler, say), which the host retries
	// too.
	ResultTransientError = "transient_error"
	// ResultTerminalError: the sidecar answered a terminal Failure (the
	// object is not retried until it changes), or a ConvertResponse.error.
	ResultTerminalError = "terminal_error"
	// ResultTransportError: no answer: the sidecar could not be reached
	// (Unavailable), the call was cancelled, or a message could not be sent
	// or read (over the size limit, undecodable).
	ResultTransportError = "transport_error"
	// ResultTimeout: no answer within the call's deadline.
	ResultTimeout = "timeout"
)

// callBuckets are the buckets of the call durations: from a tenth of a
// millisecond (a call over a unix socket that does next to nothing) to 30s
// (the default Reconcile deadline).
var callBuckets = []float64{
	0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30,
}

// callDuration measures every call the host makes to its sidecar, by method
// and gRPC status code. Its name and labels are those of earlier versions, so
// that existing dashboards keep working; the code is gRPC's, so a call the
// sidecar answered with a Failure is "OK" here: callsTotal tells results apart.
var callDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
	Name:    "polyop_sidecar_call_duration_seconds",
	Help:    "Duration of gRPC calls from the polyop host to its sidecar, by method and gRPC status code.",
	Buckets: callBuckets,
}, []string{"method", "code"})

// callsTotal counts every call the host makes to its sidecar, by controller
// (empty for calls that belong to none: Describe, health checks, webhooks),
// method and result (see classify).
var callsTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "polyop_sidecar_calls_total",
	Help: "Calls from the polyop host to its sidecar, by controller, method and result " +
		"(success, transient_error, terminal_error, transport_error, timeout).",
}, []string{"controller", "method", "result"})

// messageBuckets are the buckets of the message sizes: from 64 bytes (a
// health check, a small answer) to 64 MiB (the default largest message),
// by powers of four.
var messageBuckets = prometheus.ExponentialBuckets(64, 4, 11)

// requestBytes and responseBytes measure the messages the host sends to its
// sidecar and receives from it, by method, as they cross the wire (before
// compression, which the host does not use).
var (
	requestBytes = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "polyop_sidecar_request_bytes",
		Help:    "Size of the gRPC messages the polyop host sends to its sidecar, in bytes, by method.",
		Buckets: messageBuckets,
	}, []string{"method"})
	responseBytes = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "polyop_sidecar_response_bytes",
		Help:    "Size of the gRPC messages the polyop host receives from its sidecar, in bytes, by method.",
		Buckets: messageBuckets,
	}, []string{"method"})
)

func init() {
	metrics.Registry.MustRegister(callDuration, callsTotal, requestBytes, responseBytes)
}

// InitCallMetrics gives the polyop_sidecar_calls_total series of controller's
// calls of each method, one for each result, a value of zero, so that they
// are served before the first call.
func InitCallMetrics(controller string, methods ...string) {
	for _, m := range methods {
		for _, r := range []string{ResultSuccess, ResultTransientError, ResultTerminalError, ResultTransportError, ResultTimeout} {
			callsTotal.WithLabelValues(controller, m, r)
		}
	}
}

// observeCall is the client's interceptor: it times every call and counts
// its result. It is the one place that sees both the gRPC status and the
// answer of every call.
func observeCall(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	start := time.Now()
	err := invoker(ctx, method, req, reply, cc, opts...)
	observe(path.Base(method), controllerOf(req), start, reply, err)
	return err
}

// observe records a call of method (its name, as "Reconcile") for
// controller, made at start, that answered reply or failed with err, in
// callDuration and callsTotal.
func observe(method, controller string, start time.Time, reply any, err error) {
	callDuration.WithLabelValues(method, status.Code(err).String()).Observe(time.Since(start).Seconds())
	callsTotal.WithLabelValues(controller, method, classify(reply, err)).Inc()
}

// controllerOf is the controller a request is for, or "".
func controllerOf(req any) string {
	if r, ok := req.(interface{ GetController() string }); ok {
		return r.GetController()
	}
	return ""
}

// failureAnswer is an answer that may report a Failure: a
// ReconcileResponse or a FinalizeResponse.
type failureAnswer interface {
	GetError() *polyopv1alpha1.Failure
}

// classify tells the result of a call from its error and, when it has none,
// from the answer the sidecar sent (reply, as decoded).
func classify(reply any, err error) string {
	if err != nil {
		return classifyError(err)
	}
	if a, ok := reply.(*reconcileAnswer); ok {
		reply = a.resp
	}
	switch r := reply.(type) {
	case failureAnswer:
		switch f := r.GetError(); {
		case f == nil:
			return ResultSuccess
		case f.GetTerminal():
			return ResultTerminalError
		default:
			return ResultTransientError
		}
	case *polyopv1alpha1.ConvertResponse:
		// A failed conversion fails the API server's request; the host does
		// not retry it.
		if r.GetError() != "" {
			return ResultTerminalError
		}
	}
	return ResultSuccess
}

// classifyError tells the result of a call that failed with err.
func classifyError(err error) string {
	if errors.Is(err, context.DeadlineExceeded) {
		return ResultTimeout
	}
	switch status.Code(err) {
	case codes.DeadlineExceeded:
		return ResultTimeout
	case codes.Unavailable, codes.Canceled, codes.ResourceExhausted, codes.Internal:
		// Unavailable: no connection. Canceled: the host gave up the call
		// (it is stopping). ResourceExhausted and Internal: gRPC's own
		// errors for a message over the size limit or one it cannot decode
		// (a sidecar's handler that fails gets Unknown from its SDK).
		return ResultTransportError
	}
	return ResultTransientError
}

// messageSizes is the client's stats handler: it measures the size of every
// message sent to and received from the sidecar.
type messageSizes struct{}

type methodKey struct{}

func (messageSizes) TagRPC(ctx context.Context, info *stats.RPCTagInfo) context.Context {
	return context.WithValue(ctx, methodKey{}, path.Base(info.FullMethodName))
}

// HandleRPC measures a message. One on a ReconcileStream counts as a
// message of the unary method of its call, Reconcile or Finalize: the same
// bytes and a few more (its id, timeout and trace context).
func (messageSizes) HandleRPC(ctx context.Context, s stats.RPCStats) {
	method, _ := ctx.Value(methodKey{}).(string)
	switch p := s.(type) {
	case *stats.OutPayload:
		if r, ok := p.Payload.(*polyopv1alpha1.ReconcileStreamRequest); ok {
			method = methodReconcile
			if r.GetFinalize() != nil {
				method = methodFinalize
			}
		}
		requestBytes.WithLabelValues(method).Observe(float64(p.Length))
	case *stats.InPayload:
		if a, ok := p.Payload.(*streamAnswer); ok {
			method = a.method
		}
		responseBytes.WithLabelValues(method).Observe(float64(p.Length))
	}
}

func (messageSizes) TagConn(ctx context.Context, _ *stats.ConnTagInfo) context.Context { return ctx }

func (messageSizes) HandleConn(context.Context, stats.ConnStats) {}
