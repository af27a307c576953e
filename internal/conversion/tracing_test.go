package conversion_test

import (
	"context"
	"slices"
	"testing"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/polyop/polyop/internal/fakesidecar"
	polyopv1alpha1 "github.com/polyop/polyop/sdk/go/gen/polyop/v1alpha1"
	"github.com/polyop/polyop/sdk/go/tracing"
)

// TestEachConversionIsASpanWithItsResult sets the global tracer provider, as
// the host does when tracing is on: it runs alone, before the parallel
// tests, which then record spans nobody reads.
func TestEachConversionIsASpanWithItsResult(t *testing.T) {
	spans := tracetest.NewInMemoryExporter()
	otel.SetTracerProvider(sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans)))

	var inCall trace.SpanContext
	convert(t, &fakesidecar.Fake{OnConvert: func(ctx context.Context, req *polyopv1alpha1.ConvertRequest) (*polyopv1alpha1.ConvertResponse, error) {
		inCall = trace.SpanContextFromContext(ctx)
		return relabel(ctx, req)
	}}, "example.com/v2", "", widget("v1", "a"))
	convert(t, &fakesidecar.Fake{OnConvert: func(context.Context, *polyopv1alpha1.ConvertRequest) (*polyopv1alpha1.ConvertResponse, error) {
		return &polyopv1alpha1.ConvertResponse{Error: "no such field"}, nil
	}}, "example.com/v2", "", widget("v1", "b"))

	got := spans.GetSpans()
	if len(got) < 2 {
		t.Fatalf("%d spans, want one per conversion", len(got))
	}
	ok, failed := got[0], got[1]
	if ok.Name != "conversion" || ok.SpanContext.SpanID() != inCall.SpanID() {
		t.Errorf("the first span is %q (%s), want conversion, the sidecar call's parent (%s)", ok.Name, ok.SpanContext.SpanID(), inCall.SpanID())
	}
	if !slices.Contains(ok.Attributes, tracing.Kind.String("Widget")) || !slices.Contains(ok.Attributes, tracing.Result.String(tracing.ResultSuccess)) {
		t.Errorf("the conversion's span has attributes %v, want kind Widget and result success", ok.Attributes)
	}
	if failed.Status.Code != codes.Error || !slices.Contains(failed.Attributes, tracing.Result.String(tracing.ResultError)) {
		t.Errorf("the failed conversion's span has status %v and attributes %v, want Error and result error", failed.Status, failed.Attributes)
	}
}
