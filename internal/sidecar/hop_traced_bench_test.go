package sidecar_test

import (
	"context"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/polyop/polyop/internal/object"
	"github.com/polyop/polyop/internal/otlptest"
	"github.com/polyop/polyop/internal/sidecar"
	polyopv1alpha1 "github.com/polyop/polyop/sdk/go/gen/polyop/v1alpha1"
	sdk "github.com/polyop/polyop/sdk/go/sidecar"
	"github.com/polyop/polyop/sdk/go/tracing"
)

// benchTracedHop is reconcile/unix with tracing on both sides, as the host
// and the Go SDK trace when the OTEL_* variables turn it on: a span per
// reconcile on the host, otelgrpc's client span and W3C trace context on the
// call, otelgrpc's server span in the sidecar, every span sampled (always
// on) and exported over OTLP/gRPC, in batches, to an in-process receiver.
func benchTracedHop(b *testing.B, obj *object.Object) {
	receiver := otlptest.Start(b)
	exporter, err := otlptracegrpc.New(context.Background(),
		otlptracegrpc.WithEndpoint(strings.TrimPrefix(receiver.Endpoint(), "http://")), otlptracegrpc.WithInsecure())
	if err != nil {
		b.Fatal(err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exporter), sdktrace.WithSampler(sdktrace.AlwaysSample()))
	b.Cleanup(func() { _ = tp.Shutdown(context.Background()) })

	srv := newExampleSidecarWith(b, sdk.Options{TracerProvider: tp})
	address := socketAddress(b, "traced")
	lis, err := sdk.Listen(address)
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.ServeListener(ctx, lis) }()
	b.Cleanup(func() { cancel(); <-done })
	sc, err := sidecar.New(sidecar.Options{Address: address, TracerProvider: tp})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = sc.Close() })

	tracer := tp.Tracer("bench")
	attrs := trace.WithAttributes(
		tracing.Controller.String("maintenancewindow"), tracing.Kind.String("MaintenanceWindow"),
		tracing.Namespace.String(obj.GetNamespace()), tracing.Name.String(obj.GetName()), tracing.Retries.Int(0),
	)
	b.Run("reconcile/unix/traced", func(b *testing.B) {
		runHop(b, func(ctx context.Context) error {
			ctx, span := tracer.Start(ctx, "reconcile", attrs)
			err := hostSide(ctx, obj, func(ctx context.Context, req *polyopv1alpha1.ReconcileRequest) (*polyopv1alpha1.ReconcileResponse, error) {
				return sc.Reconcile(ctx, req)
			})
			span.SetAttributes(tracing.Result.String(tracing.ResultSuccess))
			span.End()
			return err
		})
		if err := tp.ForceFlush(context.Background()); err != nil {
			b.Fatal(err)
		}
	})
	if len(receiver.Spans()) == 0 {
		b.Fatal("the receiver got no spans")
	}
}
