package admission_test

import (
	"context"
	"slices"
	"testing"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	grpccodes "google.golang.org/grpc/codes"
	admissionv1 "k8s.io/api/admission/v1"

	"github.com/polyop/polyop/internal/admission"
	"github.com/polyop/polyop/internal/fakesidecar"
	polyopv1alpha1 "github.com/polyop/polyop/sdk/go/gen/polyop/v1alpha1"
	"github.com/polyop/polyop/sdk/go/tracing"
)

// TestEachAdmissionCallIsASpanWithItsResult sets the global tracer provider,
// as the host does when tracing is on: it runs alone, before the parallel
// tests, which then record spans nobody reads.
func TestEachAdmissionCallIsASpanWithItsResult(t *testing.T) {
	spans := tracetest.NewInMemoryExporter()
	otel.SetTracerProvider(sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans)))

	var inCall trace.SpanContext
	ok := admission.NewDefaulting(&fakesidecar.Fake{OnDefault: func(ctx context.Context, _ *polyopv1alpha1.DefaultRequest) (*polyopv1alpha1.DefaultResponse, error) {
		inCall = trace.SpanContextFromContext(ctx)
		return &polyopv1alpha1.DefaultResponse{}, nil
	}}, widgetWebhook(polyopv1alpha1.FailurePolicy_FAILURE_POLICY_FAIL), opts)
	review(t, ok, admissionv1.AdmissionRequest{}, "")
	broken := admission.NewDefaulting(&fakesidecar.Fake{OnDefault: failing(grpccodes.Internal, "boom")}, widgetWebhook(polyopv1alpha1.FailurePolicy_FAILURE_POLICY_FAIL), opts)
	review(t, broken, admissionv1.AdmissionRequest{}, "")

	got := spans.GetSpans()
	if len(got) < 2 {
		t.Fatalf("%d spans, want one per call", len(got))
	}
	first, second := got[0], got[1]
	if first.Name != "admission default" || first.SpanContext.SpanID() != inCall.SpanID() {
		t.Errorf("the first span is %q (%s), want admission default, the sidecar call's parent (%s)", first.Name, first.SpanContext.SpanID(), inCall.SpanID())
	}
	for _, want := range []attribute.KeyValue{
		tracing.Kind.String("Widget"), tracing.Namespace.String("ns"), tracing.Name.String("w"), tracing.Result.String(tracing.ResultSuccess),
	} {
		if !slices.Contains(first.Attributes, want) {
			t.Errorf("the allowed call's span lacks %s=%s: %v", want.Key, want.Value.String(), first.Attributes)
		}
	}
	if second.Status.Code != codes.Error || !slices.Contains(second.Attributes, tracing.Result.String(tracing.ResultError)) {
		t.Errorf("the failed call's span has status %v and attributes %v, want Error and result error", second.Status, second.Attributes)
	}
}
