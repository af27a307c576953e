package admission

import (
	"context"
	"net/http"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/polyop/polyop/sdk/go/tracing"
)

// tracerName names the tracer of the host's admission spans.
const tracerName = "github.com/polyop/polyop/internal/admission"

// traced runs handle in a span named "admission <verb>" with the kind,
// namespace, name and operation as attributes, and the result: success for
// an allowed request, denied for one the sidecar denied, error (status Error,
// with the message) for one the sidecar could not answer. The span is the
// parent of the sidecar call's. It uses the global tracer provider, which the
// host sets from the OTEL_* environment variables.
func (h *handler) traced(handle admission.HandlerFunc) admission.HandlerFunc {
	name := "admission " + h.verb
	return func(ctx context.Context, req admission.Request) admission.Response {
		ctx, span := otel.GetTracerProvider().Tracer(tracerName).Start(ctx, name, trace.WithAttributes(
			tracing.Kind.String(req.Kind.Kind),
			tracing.Namespace.String(req.Namespace),
			tracing.Name.String(req.Name),
			attribute.String("polyop.operation", string(req.Operation)),
		))
		defer span.End()
		resp := handle(ctx, req)
		switch {
		case resp.Allowed:
			span.SetAttributes(tracing.Result.String(tracing.ResultSuccess))
		case resp.Result != nil && resp.Result.Code >= http.StatusInternalServerError:
			span.SetAttributes(tracing.Result.String(tracing.ResultError))
			span.SetStatus(codes.Error, resp.Result.Message)
		default:
			span.SetAttributes(tracing.Result.String(tracing.ResultDenied))
		}
		return resp
	}
}
