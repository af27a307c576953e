package host

import (
	"context"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/trace"

	"github.com/polyop/polyop/sdk/go/tracing"
)

// serviceName is the host's service.name in its spans unless
// OTEL_SERVICE_NAME says otherwise.
const serviceName = "polyop-host"

// flushTimeout bounds how long the host waits at exit for its last spans to
// be exported.
const flushTimeout = 5 * time.Second

// setUpTracing sets up OpenTelemetry tracing from the OTEL_* environment
// variables (see package tracing). It returns the tracer provider the
// sidecar connection and the cluster service trace their calls with, nil
// when tracing is off, and a shutdown that flushes the spans not yet
// exported.
func setUpTracing(ctx context.Context, log logr.Logger) (trace.TracerProvider, func(), error) {
	enabled, shutdown, err := tracing.Setup(ctx, tracing.Options{ServiceName: serviceName})
	if err != nil {
		return nil, nil, fmt.Errorf("setting up tracing from the OTEL_* environment variables: %w", err)
	}
	if !enabled {
		return nil, func() {}, nil
	}
	log.Info("tracing: exporting spans over OTLP as the OTEL_* environment variables say")
	return otel.GetTracerProvider(), func() {
		flushCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), flushTimeout)
		defer cancel()
		if err := shutdown(flushCtx); err != nil {
			log.Error(err, "tracing: flushing the last spans")
		}
	}, nil
}
