// Package tracing sets up OpenTelemetry tracing for polyop from the standard
// OTEL_* environment variables, and names the span attributes the host and
// every SDK share.
//
// Tracing is off unless the environment asks for it: Setup returns
// Enabled false, and sets nothing, when none of OTEL_TRACES_EXPORTER=otlp,
// OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is set,
// when OTEL_TRACES_EXPORTER is "none", or when OTEL_SDK_DISABLED is "true".
// Otherwise it builds an OTLP exporter (gRPC, or HTTP with protobuf when
// OTEL_EXPORTER_OTLP_TRACES_PROTOCOL or OTEL_EXPORTER_OTLP_PROTOCOL is
// "http/protobuf"), a batching tracer provider whose sampler and resource
// follow OTEL_TRACES_SAMPLER, OTEL_TRACES_SAMPLER_ARG, OTEL_SERVICE_NAME and
// OTEL_RESOURCE_ATTRIBUTES, and sets it as the global tracer provider, with
// W3C TraceContext and Baggage as the global propagators. The exporter reads
// the rest of the OTEL_EXPORTER_OTLP_* variables (headers, timeout,
// certificates, insecure) itself.
//
// The polyop host and the Go SDK's Server call Setup; a sidecar that wants
// spans of its own uses the global provider (otel.Tracer) or, in a handler,
// adds to the span trace.SpanFromContext(ctx) returns.
package tracing

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/baggage"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.37.0"
	"go.opentelemetry.io/otel/trace"
)

// The span attributes of polyop's spans, the same in the host and in every
// SDK.
const (
	// Controller is the controller's name.
	Controller = attribute.Key("polyop.controller")
	// Kind is the kind of the object (Kind, without group and version).
	Kind = attribute.Key("polyop.kind")
	// Namespace is the object's namespace (empty for a cluster-scoped one).
	Namespace = attribute.Key("polyop.namespace")
	// Name is the object's name.
	Name = attribute.Key("polyop.name")
	// ReconcileID is controller-runtime's ID of one reconcile, the
	// reconcileID of the host's logs.
	ReconcileID = attribute.Key("polyop.reconcile_id")
	// Retries is how many times in a row the object's reconcile failed
	// before this one.
	Retries = attribute.Key("polyop.retries")
	// Result is how the call ended; see the Result* constants.
	Result = attribute.Key("polyop.result")
)

// The values of the Result attribute.
const (
	// ResultSuccess is a call that succeeded without asking for a retry.
	ResultSuccess = "success"
	// ResultRequeue is a reconcile that succeeded and asked to be called
	// again after a while.
	ResultRequeue = "requeue"
	// ResultError is a call that failed and is retried with backoff.
	ResultError = "error"
	// ResultTerminalError is a reconcile that failed and is not retried
	// until the object changes.
	ResultTerminalError = "terminal_error"
	// ResultUnavailable is a call that found the sidecar unreachable, or
	// ran out of time.
	ResultUnavailable = "unavailable"
	// ResultDenied is an admission call that denied the request.
	ResultDenied = "denied"
)

// BaggageReconcileID is the W3C baggage member the host sets to the
// reconcile's ID on every Reconcile and Finalize call, so that an SDK can log
// it as reconcileID.
const BaggageReconcileID = "polyop.reconcile_id"

// ReconcileIDFromContext returns the reconcile ID the host sent in ctx's
// baggage, or "".
func ReconcileIDFromContext(ctx context.Context) string {
	return baggage.FromContext(ctx).Member(BaggageReconcileID).Value()
}

// ContextWithReconcileID returns ctx whose baggage carries id as
// BaggageReconcileID.
func ContextWithReconcileID(ctx context.Context, id string) context.Context {
	m, err := baggage.NewMemberRaw(BaggageReconcileID, id)
	if err != nil {
		return ctx
	}
	b, err := baggage.FromContext(ctx).SetMember(m)
	if err != nil {
		return ctx
	}
	return baggage.ContextWithBaggage(ctx, b)
}

// LogValues returns the trace_id and span_id of the span in ctx, as
// key-value pairs for a logr logger, or nil when ctx holds no valid span.
func LogValues(ctx context.Context) []any {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() {
		return nil
	}
	return []any{"trace_id", sc.TraceID().String(), "span_id", sc.SpanID().String()}
}

// Propagator is W3C TraceContext and Baggage, the propagation polyop uses on
// every gRPC call between host and sidecar.
func Propagator() propagation.TextMapPropagator {
	return propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})
}

// Options configure Setup.
type Options struct {
	// ServiceName is the service.name of the spans when OTEL_SERVICE_NAME
	// does not set one. Defaults to the program's name.
	ServiceName string
}

// Setup reads the OTEL_* environment variables and, when they turn tracing
// on, sets up the global tracer provider and propagators (see the package
// documentation). The returned shutdown flushes the spans not yet exported
// and stops the provider; it does nothing when tracing is off. Call it before
// the program exits.
func Setup(ctx context.Context, opts Options) (enabled bool, shutdown func(context.Context) error, err error) {
	tp, err := NewProvider(ctx, opts)
	if err != nil || tp == nil {
		return false, func(context.Context) error { return nil }, err
	}
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(Propagator())
	return true, tp.Shutdown, nil
}

// NewProvider returns the tracer provider the OTEL_* environment variables
// configure, or nil when they leave tracing off. Setup sets it as the global
// one; NewProvider leaves the global state alone.
func NewProvider(ctx context.Context, opts Options) (*sdktrace.TracerProvider, error) {
	// The exporter and the provider read the process's environment too.
	getenv := os.Getenv
	on, err := Enabled(getenv)
	if err != nil || !on {
		return nil, err
	}
	exporter, err := newExporter(ctx, getenv)
	if err != nil {
		return nil, err
	}
	name := opts.ServiceName
	if name == "" && len(os.Args) > 0 {
		name = baseName(os.Args[0])
	}
	// Detectors that come later win: OTEL_SERVICE_NAME and
	// OTEL_RESOURCE_ATTRIBUTES over the default name.
	res, err := resource.New(ctx,
		resource.WithAttributes(semconv.ServiceName(name)),
		resource.WithTelemetrySDK(),
		resource.WithFromEnv(),
	)
	if err != nil {
		return nil, fmt.Errorf("OTEL_RESOURCE_ATTRIBUTES: %w", err)
	}
	// NewTracerProvider reads OTEL_TRACES_SAMPLER and OTEL_TRACES_SAMPLER_ARG
	// (default: parentbased_always_on) and the OTEL_BSP_* batch settings.
	return sdktrace.NewTracerProvider(sdktrace.WithBatcher(exporter), sdktrace.WithResource(res)), nil
}

// Enabled reports whether the OTEL_* variables getenv reads turn tracing on.
// An exporter other than otlp or none is an error: polyop builds only those.
func Enabled(getenv func(string) string) (bool, error) {
	if strings.EqualFold(strings.TrimSpace(getenv("OTEL_SDK_DISABLED")), "true") {
		return false, nil
	}
	switch exporters := strings.TrimSpace(getenv("OTEL_TRACES_EXPORTER")); exporters {
	case "":
		return getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != "", nil
	case "none":
		return false, nil
	case "otlp":
		return true, nil
	default:
		return false, fmt.Errorf("OTEL_TRACES_EXPORTER=%q: polyop exports traces with otlp only; set it to otlp or none", exporters)
	}
}

// newExporter builds the OTLP exporter of the protocol the environment
// names.
func newExporter(ctx context.Context, getenv func(string) string) (sdktrace.SpanExporter, error) {
	protocol := getenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
	variable := "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"
	if protocol == "" {
		protocol, variable = getenv("OTEL_EXPORTER_OTLP_PROTOCOL"), "OTEL_EXPORTER_OTLP_PROTOCOL"
	}
	switch strings.TrimSpace(protocol) {
	case "", "grpc":
		return otlptracegrpc.New(ctx)
	case "http/protobuf":
		return otlptracehttp.New(ctx)
	}
	return nil, errors.New(variable + "=" + protocol + ": polyop exports traces over grpc or http/protobuf; set it to one of them")
}

func baseName(path string) string {
	if i := strings.LastIndexAny(path, `/\`); i >= 0 {
		return path[i+1:]
	}
	return path
}
