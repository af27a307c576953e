package sidecar

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/stats"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/polyop/polyop/internal/fakesidecar"
	polyopv1alpha1 "github.com/polyop/polyop/sdk/go/gen/polyop/v1alpha1"
)

func TestClassify(t *testing.T) {
	t.Parallel()
	failure := func(f *polyopv1alpha1.Failure) *reconcileAnswer {
		return &reconcileAnswer{resp: &polyopv1alpha1.ReconcileResponse{Error: f}}
	}
	for name, tc := range map[string]struct {
		reply any
		err   error
		want  string
	}{
		"if the sidecar answers no error, then it is a success": {
			reply: failure(nil), want: ResultSuccess,
		},
		"if the sidecar answers a terminal Failure, then it is a terminal error, not a success": {
			reply: failure(&polyopv1alpha1.Failure{Message: "no", Terminal: true}), want: ResultTerminalError,
		},
		"if the sidecar answers a Failure that is not terminal, then it is a transient error": {
			reply: failure(&polyopv1alpha1.Failure{Message: "later", RetryAfter: durationpb.New(time.Second)}), want: ResultTransientError,
		},
		"if a Finalize answers a terminal Failure, then it is a terminal error": {
			reply: &polyopv1alpha1.FinalizeResponse{Error: &polyopv1alpha1.Failure{Terminal: true}}, want: ResultTerminalError,
		},
		"if a conversion fails, then it is a terminal error": {
			reply: &polyopv1alpha1.ConvertResponse{Error: "cannot"}, want: ResultTerminalError,
		},
		"if a webhook denies, then it is a success: a denial is an answer": {
			reply: &polyopv1alpha1.ValidateResponse{Denied: &polyopv1alpha1.Denial{Message: "no"}}, want: ResultSuccess,
		},
		"if the call runs out of time, then it is a timeout": {
			err: status.Error(codes.DeadlineExceeded, "context deadline exceeded"), want: ResultTimeout,
		},
		"if the context's deadline passed before the call, then it is a timeout": {
			err: fmt.Errorf("calling: %w", context.DeadlineExceeded), want: ResultTimeout,
		},
		"if the sidecar cannot be reached, then it is a transport error": {
			err: status.Error(codes.Unavailable, "connection refused"), want: ResultTransportError,
		},
		"if the answer is over the message size limit, then it is a transport error": {
			err: status.Error(codes.ResourceExhausted, "grpc: received message larger than max"), want: ResultTransportError,
		},
		"if the sidecar's handler fails the call with a status of its own, then it is a transient error": {
			err: status.Error(codes.Unknown, "exception in handler"), want: ResultTransientError,
		},
		"if the error is not gRPC's at all, then it is a transient error": {
			err: errors.New("boom"), want: ResultTransientError,
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			if got := classify(tc.reply, tc.err); got != tc.want {
				t.Errorf("classify = %q, want %q", got, tc.want)
			}
		})
	}
}

// TestCallsAreCountedByResult drives each result class through a real gRPC
// connection to a fake sidecar and reads the counters.
func TestCallsAreCountedByResult(t *testing.T) {
	t.Parallel()
	answers := map[string]*polyopv1alpha1.ReconcileResponse{
		"metrics-success":   {},
		"metrics-terminal":  {Error: &polyopv1alpha1.Failure{Message: "bad spec", Terminal: true}},
		"metrics-transient": {Error: &polyopv1alpha1.Failure{Message: "not yet"}},
	}
	fake := &fakesidecar.Fake{OnReconcile: func(ctx context.Context, req *polyopv1alpha1.ReconcileRequest) (*polyopv1alpha1.ReconcileResponse, error) {
		switch req.GetController() {
		case "metrics-timeout":
			<-ctx.Done()
			return nil, ctx.Err()
		case "metrics-handler-error":
			return nil, status.Error(codes.Unknown, "exception in handler")
		}
		return answers[req.GetController()], nil
	}}
	addr, _ := fakesidecar.Serve(t, fake)
	c, err := New(Options{Address: addr, ReconcileTimeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	down, err := New(Options{Address: "unix://" + filepath.Join(t.TempDir(), "nobody.sock")})
	if err != nil {
		t.Fatal(err)
	}
	defer down.Close()

	for controller, want := range map[string]string{
		"metrics-success":       ResultSuccess,
		"metrics-terminal":      ResultTerminalError,
		"metrics-transient":     ResultTransientError,
		"metrics-handler-error": ResultTransientError,
		"metrics-timeout":       ResultTimeout,
		"metrics-transport":     ResultTransportError,
	} {
		client := c
		if want == ResultTransportError {
			client = down
		}
		before := testutil.ToFloat64(callsTotal.WithLabelValues(controller, "Reconcile", want))
		_, _ = client.Reconcile(context.Background(), &polyopv1alpha1.ReconcileRequest{Controller: controller})
		if got := testutil.ToFloat64(callsTotal.WithLabelValues(controller, "Reconcile", want)) - before; got != 1 {
			t.Errorf("polyop_sidecar_calls_total{controller=%q,method=\"Reconcile\",result=%q} grew by %v, want 1", controller, want, got)
		}
	}
	// A terminal error is counted as that alone, never as a success.
	if got := testutil.ToFloat64(callsTotal.WithLabelValues("metrics-terminal", "Reconcile", ResultSuccess)); got != 0 {
		t.Errorf("a terminal error was also counted as a success (%v)", got)
	}
}

func TestMessageSizesAreMeasured(t *testing.T) {
	t.Parallel()
	fake := &fakesidecar.Fake{OnConvert: func(_ context.Context, req *polyopv1alpha1.ConvertRequest) (*polyopv1alpha1.ConvertResponse, error) {
		return &polyopv1alpha1.ConvertResponse{Objects: req.GetObjects()}, nil
	}}
	addr, _ := fakesidecar.Serve(t, fake)
	c, err := New(Options{Address: addr})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	before := histogram(t, requestBytes, "Convert")
	beforeResp := histogram(t, responseBytes, "Convert")
	obj := make([]byte, 5000)
	if _, err := c.Convert(context.Background(), &polyopv1alpha1.ConvertRequest{Objects: [][]byte{obj}}); err != nil {
		t.Fatal(err)
	}
	after := histogram(t, requestBytes, "Convert")
	afterResp := histogram(t, responseBytes, "Convert")
	if n := after.GetSampleCount() - before.GetSampleCount(); n < 1 {
		t.Fatalf("no request size observed")
	}
	if sum := after.GetSampleSum() - before.GetSampleSum(); sum < 5000 {
		t.Errorf("request bytes grew by %v, want at least the 5000 bytes of the object", sum)
	}
	if sum := afterResp.GetSampleSum() - beforeResp.GetSampleSum(); sum < 5000 {
		t.Errorf("response bytes grew by %v, want at least the 5000 bytes of the object", sum)
	}
}

// histogram reads the histogram of method in h.
func histogram(t *testing.T, h *prometheus.HistogramVec, method string) *dto.Histogram {
	t.Helper()
	var m dto.Metric
	if err := h.WithLabelValues(method).(prometheus.Metric).Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetHistogram()
}

func TestSidecarUpFollowsItsHealth(t *testing.T) {
	t.Parallel()
	addr, hs := fakesidecar.Serve(t, &fakesidecar.Fake{})
	c, err := New(Options{Address: addr})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if got := testutil.ToFloat64(c.UpCollector()); got != 1 {
		t.Errorf("polyop_sidecar_up = %v with the sidecar serving, want 1", got)
	}
	hs.SetServingStatus("", healthpb.HealthCheckResponse_NOT_SERVING)
	if got := testutil.ToFloat64(c.UpCollector()); got != 0 {
		t.Errorf("polyop_sidecar_up = %v with the sidecar NOT_SERVING, want 0", got)
	}

	down, err := New(Options{Address: "unix://" + filepath.Join(t.TempDir(), "nobody.sock")})
	if err != nil {
		t.Fatal(err)
	}
	defer down.Close()
	if got := testutil.ToFloat64(down.UpCollector()); got != 0 {
		t.Errorf("polyop_sidecar_up = %v with no sidecar, want 0", got)
	}
}

// BenchmarkCallMetrics measures what the metrics add to one Reconcile call:
// the result's classification and count, and the two message sizes.
func BenchmarkCallMetrics(b *testing.B) {
	reply := &reconcileAnswer{resp: &polyopv1alpha1.ReconcileResponse{}}
	req := &polyopv1alpha1.ReconcileRequest{Controller: "bench"}
	h := messageSizes{}
	ctx := h.TagRPC(context.Background(), &stats.RPCTagInfo{FullMethodName: polyopv1alpha1.SidecarService_Reconcile_FullMethodName})
	out, in := &stats.OutPayload{Length: 4096}, &stats.InPayload{Length: 512}
	b.ReportAllocs()
	for b.Loop() {
		callsTotal.WithLabelValues(controllerOf(req), "Reconcile", classify(reply, nil)).Inc()
		h.HandleRPC(ctx, out)
		h.HandleRPC(ctx, in)
	}
}
