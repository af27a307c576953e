package tracing_test

import (
	"context"
	"strings"
	"testing"

	"github.com/polyop/polyop/sdk/go/tracing"
)

func TestEnabled(t *testing.T) {
	for name, tc := range map[string]struct {
		env     map[string]string
		want    bool
		wantErr string
	}{
		"if nothing is set, then tracing is off":                  {},
		"if an OTLP endpoint is set, then tracing is on":          {env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4317"}, want: true},
		"if an OTLP traces endpoint is set, then tracing is on":   {env: map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://collector:4318/v1/traces"}, want: true},
		"if the exporter is otlp, then tracing is on":             {env: map[string]string{"OTEL_TRACES_EXPORTER": "otlp"}, want: true},
		"if the exporter is none, then tracing is off":            {env: map[string]string{"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4317"}},
		"if the SDK is disabled, then tracing is off":             {env: map[string]string{"OTEL_SDK_DISABLED": "true", "OTEL_TRACES_EXPORTER": "otlp"}},
		"if the exporter is one polyop lacks, then it says which": {env: map[string]string{"OTEL_TRACES_EXPORTER": "zipkin"}, wantErr: `OTEL_TRACES_EXPORTER="zipkin": polyop exports traces with otlp only`},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := tracing.Enabled(func(k string) string { return tc.env[k] })
			if got != tc.want || (err == nil) != (tc.wantErr == "") || (err != nil && !strings.Contains(err.Error(), tc.wantErr)) {
				t.Errorf("Enabled = %v, %v; want %v, %q", got, err, tc.want, tc.wantErr)
			}
		})
	}
}

func TestNewProviderRefusesAnUnknownProtocol(t *testing.T) {
	t.Setenv("OTEL_TRACES_EXPORTER", "otlp")
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json")
	_, err := tracing.NewProvider(context.Background(), tracing.Options{})
	if err == nil || !strings.Contains(err.Error(), "OTEL_EXPORTER_OTLP_PROTOCOL=http/json: polyop exports traces over grpc or http/protobuf") {
		t.Errorf("NewProvider = %v, want an error naming the protocol", err)
	}
}

func TestReconcileIDTravelsInBaggage(t *testing.T) {
	ctx := tracing.ContextWithReconcileID(context.Background(), "abc")
	if got := tracing.ReconcileIDFromContext(ctx); got != "abc" {
		t.Errorf("ReconcileIDFromContext = %q, want abc", got)
	}
	if got := tracing.ReconcileIDFromContext(context.Background()); got != "" {
		t.Errorf("ReconcileIDFromContext of an empty context = %q", got)
	}
}
