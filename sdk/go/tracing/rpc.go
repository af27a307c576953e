package tracing

import (
	"strings"
	"unicode"

	"go.opentelemetry.io/otel/attribute"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc/codes"
)

// CallSpanOptions are the options of the span of one Reconcile or Finalize
// call made on a ReconcileStream (kind trace.SpanKindClient on the host,
// trace.SpanKindServer in the sidecar), named fullMethod, the unary method's
// ("polyop.v1alpha1.SidecarService/Reconcile"): the span otelgrpc would make
// of the same unary call, which it cannot make of a message on a stream.
func CallSpanOptions(kind trace.SpanKind, fullMethod string) []trace.SpanStartOption {
	return []trace.SpanStartOption{
		trace.WithSpanKind(kind),
		trace.WithAttributes(semconv.RPCSystemNameGRPC, semconv.RPCMethod(fullMethod)),
	}
}

// RPCStatusCode is the rpc.response.status_code attribute of a call that
// ended with code, as otelgrpc sets it: "OK", "CANCELLED",
// "DEADLINE_EXCEEDED" (the names of google.rpc.Code).
func RPCStatusCode(code codes.Code) attribute.KeyValue {
	return semconv.RPCResponseStatusCode(canonicalCode(code))
}

func canonicalCode(code codes.Code) string {
	switch code {
	case codes.OK:
		return "OK"
	case codes.Canceled:
		return "CANCELLED"
	}
	var b strings.Builder
	for i, r := range code.String() {
		if i > 0 && unicode.IsUpper(r) {
			b.WriteByte('_')
		}
		b.WriteRune(unicode.ToUpper(r))
	}
	return b.String()
}
