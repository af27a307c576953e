package controller

import (
	"context"
	"errors"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"k8s.io/apimachinery/pkg/types"
	ctrlcontroller "sigs.k8s.io/controller-runtime/pkg/controller"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/polyop/polyop/sdk/go/tracing"
)

// tracerName names the tracer of the host's reconcile spans.
const tracerName = "github.com/polyop/polyop/internal/controller"

// newTracer is tp's tracer, or by default the global tracer provider's, which
// the host sets from the OTEL_* environment variables, and which makes
// non-recording spans at next to no cost while tracing is off.
func newTracer(tp trace.TracerProvider) trace.Tracer {
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	return tp.Tracer(tracerName)
}

// The names of the spans the controller makes. The sidecar call under them
// is otelgrpc's client span, named after the RPC.
const (
	spanReconcile       = "reconcile"
	spanFinalize        = "finalize"
	spanWriteStatus     = "write status"
	spanApplyChild      = "apply child"
	spanPruneChild      = "prune child"
	spanAddFinalizer    = "add finalizer"
	spanRemoveFinalizer = "remove finalizer"
)

// childAttribute names the child a span applies or prunes, as
// its Kind and namespace/name.
const childAttribute = attribute.Key("polyop.child")

// objectAttributes are the attributes that name the controller and the
// object of a span.
func (r *Reconciler) objectAttributes(key types.NamespacedName) []attribute.KeyValue {
	return []attribute.KeyValue{
		tracing.Controller.String(r.Controller.Name),
		tracing.Kind.String(r.Controller.GVK.Kind),
		tracing.Namespace.String(key.Namespace),
		tracing.Name.String(key.Name),
	}
}

// startReconcile starts the span of one reconcile (or finalize): the
// controller, the object, controller-runtime's reconcile ID and the retries
// as attributes. The context it returns carries the span, the reconcile ID
// in its baggage (so the sidecar can log it) and a logger with the trace and
// span IDs.
//
// The attributes are set once the span is started, and only on a span that
// records: while tracing is off they cost nothing. (No sampler the OTEL_*
// variables configure reads a span's attributes.)
func (r *Reconciler) startReconcile(ctx context.Context, name string, req reconcile.Request) (context.Context, trace.Span) {
	ctx, span := r.tracer.Start(ctx, name)
	if !span.SpanContext().IsValid() {
		// Tracing is off.
		return ctx, span
	}
	id := string(ctrlcontroller.ReconcileIDFromContext(ctx))
	if span.IsRecording() {
		attrs := append(r.objectAttributes(req.NamespacedName), tracing.Retries.Int(r.limiter.NumRequeues(req)))
		if id != "" {
			attrs = append(attrs, tracing.ReconcileID.String(id))
		}
		span.SetAttributes(attrs...)
	}
	if id != "" {
		ctx = tracing.ContextWithReconcileID(ctx, id)
	}
	return logf.IntoContext(ctx, logf.FromContext(ctx).WithValues(tracing.LogValues(ctx)...)), span
}

// endReconcile records how a reconcile (or finalize) ended on its span, and
// ends it: polyop.result, and status Error with the message on failure.
func endReconcile(span trace.Span, res reconcile.Result, err error) {
	if span.IsRecording() {
		span.SetAttributes(tracing.Result.String(resultOf(res, err)))
	}
	endSpan(span, err)
}

// resultOf is the polyop.result of a reconcile that returned res and err.
func resultOf(res reconcile.Result, err error) string {
	if err == nil {
		if res.RequeueAfter > 0 || res.Requeue { //nolint:staticcheck // a Requeue the host sets itself, for a stale write
			return tracing.ResultRequeue
		}
		return tracing.ResultSuccess
	}
	var unreachable *unreachableError
	switch {
	case errors.As(err, &unreachable):
		return tracing.ResultUnavailable
	case errors.Is(err, reconcile.TerminalError(nil)):
		return tracing.ResultTerminalError
	}
	return tracing.ResultError
}

// startWrite starts the span of one of the host's own writes, under the
// reconcile's.
func (r *Reconciler) startWrite(ctx context.Context, name string, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	return r.tracer.Start(ctx, name, trace.WithAttributes(attrs...))
}

// endSpan ends span, with status Error and err's message when err is not
// nil.
func endSpan(span trace.Span, err error) {
	if err != nil {
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}
