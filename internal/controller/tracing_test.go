package controller

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/go-logr/logr/funcr"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/polyop/polyop/internal/fakesidecar"
	polyopv1alpha1 "github.com/polyop/polyop/sdk/go/gen/polyop/v1alpha1"
	"github.com/polyop/polyop/sdk/go/tracing"
)

// traced gives r a tracer provider that records every span, and returns
// the recorder.
func traced(r *Reconciler) *tracetest.InMemoryExporter {
	spans := tracetest.NewInMemoryExporter()
	r.tracer = newTracer(sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans)))
	return spans
}

// spanNamed is the one span named name.
func spanNamed(t *testing.T, spans tracetest.SpanStubs, name string) tracetest.SpanStub {
	t.Helper()
	var found []tracetest.SpanStub
	for _, s := range spans {
		if s.Name == name {
			found = append(found, s)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%d spans named %q, want 1: %v", len(found), name, names(spans))
	}
	return found[0]
}

func names(spans tracetest.SpanStubs) []string {
	var out []string
	for _, s := range spans {
		out = append(out, s.Name)
	}
	return out
}

func TestAReconcileIsASpanWithTheHostsWritesUnderIt(t *testing.T) {
	t.Parallel()
	var inCall trace.SpanContext
	var logged []string
	sc := &fakesidecar.Fake{OnReconcile: func(ctx context.Context, _ *polyopv1alpha1.ReconcileRequest) (*polyopv1alpha1.ReconcileResponse, error) {
		inCall = trace.SpanContextFromContext(ctx)
		logf.FromContext(ctx).Info("calling the sidecar")
		return &polyopv1alpha1.ReconcileResponse{
			DesiredChildren: [][]byte{secretChild("a", "MQ==")}, ChildrenComplete: true,
		}, nil
	}}
	r, _, _ := newFlow(t, "example.com/cleanup", sc, ownerMap())
	spans := traced(r)
	log := funcr.New(func(prefix, args string) { logged = append(logged, args) }, funcr.Options{})
	if _, err := r.Reconcile(logf.IntoContext(context.Background(), log), req); err != nil {
		t.Fatal(err)
	}

	got := spans.GetSpans()
	root := spanNamed(t, got, spanReconcile)
	for _, want := range []attribute.KeyValue{
		tracing.Controller.String("maps"), tracing.Kind.String("ConfigMap"), tracing.Namespace.String("ns"), tracing.Name.String("o"),
		tracing.Retries.Int(0), tracing.Result.String(tracing.ResultSuccess),
	} {
		if !slices.Contains(root.Attributes, want) {
			t.Errorf("the reconcile span lacks %s=%s: %v", want.Key, want.Value.String(), root.Attributes)
		}
	}
	if root.Parent.IsValid() {
		t.Errorf("the reconcile span has a parent %v, want none", root.Parent)
	}
	if inCall.SpanID() != root.SpanContext.SpanID() {
		t.Errorf("the sidecar call's context carries span %s, want the reconcile's %s", inCall.SpanID(), root.SpanContext.SpanID())
	}
	// (ConfigMaps have no status subresource to write; the end-to-end
	// test sees the status write's span.)
	for _, name := range []string{spanAddFinalizer, spanApplyChild} {
		if s := spanNamed(t, got, name); s.Parent.SpanID() != root.SpanContext.SpanID() {
			t.Errorf("span %q has parent %s, want the reconcile's %s", name, s.Parent.SpanID(), root.SpanContext.SpanID())
		}
	}
	if s := spanNamed(t, got, spanApplyChild); !slices.Contains(s.Attributes, childAttribute.String("Secret ns/a")) {
		t.Errorf("the apply span does not name the child: %v", s.Attributes)
	}
	want := `"trace_id"="` + root.SpanContext.TraceID().String() + `" "span_id"="` + root.SpanContext.SpanID().String() + `"`
	if len(logged) == 0 || !strings.Contains(logged[0], want) {
		t.Errorf("the log line in the call is %q, want it to carry %s", logged, want)
	}
}

func TestAFailedReconcileIsAnErrorSpanWithItsResult(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		failure    *polyopv1alpha1.Failure
		wantResult string
	}{
		"if the sidecar reports an error, then the span is an error":             {&polyopv1alpha1.Failure{Message: "not now"}, tracing.ResultError},
		"if the sidecar reports a terminal error, then the result says terminal": {&polyopv1alpha1.Failure{Message: "never", Terminal: true}, tracing.ResultTerminalError},
	} {
		t.Run(name, func(t *testing.T) {
			sc := &fakesidecar.Fake{OnReconcile: fakesidecar.Answer(func(*polyopv1alpha1.ReconcileRequest) *polyopv1alpha1.ReconcileResponse {
				return &polyopv1alpha1.ReconcileResponse{Error: tc.failure}
			})}
			r, _, _ := newFlow(t, "", sc, ownerMap())
			spans := traced(r)
			_, _ = r.Reconcile(context.Background(), req)
			root := spanNamed(t, spans.GetSpans(), spanReconcile)
			if root.Status.Code != codes.Error || !strings.Contains(root.Status.Description, tc.failure.GetMessage()) {
				t.Errorf("span status %v %q, want Error with %q", root.Status.Code, root.Status.Description, tc.failure.GetMessage())
			}
			if !slices.Contains(root.Attributes, tracing.Result.String(tc.wantResult)) {
				t.Errorf("span attributes %v, want result %s", root.Attributes, tc.wantResult)
			}
		})
	}
}
