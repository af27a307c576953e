package sidecar_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/grpc/status"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/utils/ptr"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	polyopv1alpha1 "github.com/polyop/polyop/sdk/go/gen/polyop/v1alpha1"
	"github.com/polyop/polyop/sdk/go/sidecar"
	"github.com/polyop/polyop/sdk/go/tracing"
)

// serveOn serves srv on a fresh unix socket until the test ends and returns
// the socket's address once the server answers health checks.
func serveOn(t *testing.T, srv *sidecar.Server) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "polyop")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	address := "unix://" + filepath.Join(dir, "sidecar.sock")
	lis, err := sidecar.Listen(address)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- srv.ServeListener(ctx, lis) }()
	t.Cleanup(func() {
		cancel()
		if err := <-served; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	conn := dialPlain(t, address)
	checkCtx, checkCancel := context.WithTimeout(ctx, time.Minute)
	defer checkCancel()
	if _, err := healthpb.NewHealthClient(conn).Check(checkCtx, &healthpb.HealthCheckRequest{}, grpc.WaitForReady(true)); err != nil {
		t.Fatal(err)
	}
	return address
}

func dialPlain(t *testing.T, address string, opts ...grpc.DialOption) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient(address, append([]grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

// listServices asks the server reflection service at conn which services it
// serves.
func listServices(ctx context.Context, conn *grpc.ClientConn) ([]string, error) {
	stream, err := reflectionpb.NewServerReflectionClient(conn).ServerReflectionInfo(ctx)
	if err != nil {
		return nil, err
	}
	// A Send that fails with io.EOF means the server ended the stream (for
	// instance, Unimplemented); as grpc-go documents, Recv then returns the
	// stream's real status.
	if err := stream.Send(&reflectionpb.ServerReflectionRequest{MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{}}); err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	resp, err := stream.Recv()
	if err != nil {
		return nil, err
	}
	var names []string
	for _, s := range resp.GetListServicesResponse().GetService() {
		names = append(names, s.GetName())
	}
	slices.Sort(names)
	return names, stream.CloseSend()
}

func newDeploymentServer(t *testing.T, opts sidecar.Options, reconcile func(context.Context, *appsv1.Deployment) (sidecar.Result, error)) *sidecar.Server {
	t.Helper()
	opts.Name = "test"
	srv, err := sidecar.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := sidecar.NewControllerManagedBy[*appsv1.Deployment](srv).Named("web").Complete(sidecar.ReconcilerFunc[*appsv1.Deployment](reconcile)); err != nil {
		t.Fatal(err)
	}
	return srv
}

func noop(context.Context, *appsv1.Deployment) (sidecar.Result, error) { return sidecar.Result{}, nil }

func TestServerReflectionIsOnForAUnixSocketUnlessTurnedOff(t *testing.T) {
	t.Parallel()
	conn := dialPlain(t, serveOn(t, newDeploymentServer(t, sidecar.Options{}, noop)))
	got, err := listServices(t.Context(), conn)
	if err != nil {
		t.Fatalf("listing services through reflection: %v", err)
	}
	want := []string{"grpc.health.v1.Health", "grpc.reflection.v1.ServerReflection", "grpc.reflection.v1alpha.ServerReflection", "polyop.v1alpha1.SidecarService"}
	if !slices.Equal(got, want) {
		t.Errorf("reflection lists %q, want %q", got, want)
	}

	off := dialPlain(t, serveOn(t, newDeploymentServer(t, sidecar.Options{Reflection: ptr.To(false)}, noop)))
	if _, err := listServices(t.Context(), off); status.Code(err) != codes.Unimplemented {
		t.Errorf("with Reflection false, listing services = %v, want Unimplemented", err)
	}
}

// lineLog is a logger that keeps every line, as JSON.
type lineLog struct {
	mu    sync.Mutex
	lines []map[string]any
}

func (l *lineLog) logger() sidecar.Options {
	return sidecar.Options{Logger: funcr.NewJSON(func(obj string) {
		var m map[string]any
		_ = json.Unmarshal([]byte(obj), &m)
		l.mu.Lock()
		defer l.mu.Unlock()
		l.lines = append(l.lines, m)
	}, funcr.Options{})}
}

func (l *lineLog) find(msg string) map[string]any {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, m := range l.lines {
		if m["msg"] == msg {
			return m
		}
	}
	return nil
}

func TestTheHandlerRunsInTheHostsTraceAndLogsItsIDs(t *testing.T) {
	t.Parallel()
	sidecarSpans := tracetest.NewInMemoryExporter()
	sidecarTP := sdktrace.NewTracerProvider(sdktrace.WithSyncer(sidecarSpans))
	hostSpans := tracetest.NewInMemoryExporter()
	hostTP := sdktrace.NewTracerProvider(sdktrace.WithSyncer(hostSpans))

	var log lineLog
	opts := log.logger()
	opts.TracerProvider = sidecarTP
	var inHandler trace.SpanContext
	address := serveOn(t, newDeploymentServer(t, opts, func(ctx context.Context, _ *appsv1.Deployment) (sidecar.Result, error) {
		span := trace.SpanFromContext(ctx)
		span.SetAttributes(tracing.Name.String("set by the handler"))
		inHandler = span.SpanContext()
		logf.FromContext(ctx).Info("in the handler")
		return sidecar.Result{}, nil
	}))
	conn := dialPlain(t, address, grpc.WithStatsHandler(otelgrpc.NewClientHandler(
		otelgrpc.WithTracerProvider(hostTP), otelgrpc.WithPropagators(tracing.Propagator()))))

	ctx, reconcile := hostTP.Tracer("test").Start(t.Context(), "reconcile")
	ctx = tracing.ContextWithReconcileID(ctx, "1b7a7e0e-0000-4000-8000-000000000001")
	raw, _ := json.Marshal(deployment(1))
	_, err := polyopv1alpha1.NewSidecarServiceClient(conn).Reconcile(ctx, &polyopv1alpha1.ReconcileRequest{
		Controller: "web", Key: &polyopv1alpha1.ObjectKey{Namespace: "default", Name: "web"}, Object: raw,
	})
	reconcile.End()
	if err != nil {
		t.Fatal(err)
	}

	var client tracetest.SpanStub
	for _, s := range hostSpans.GetSpans() {
		if s.SpanKind == trace.SpanKindClient {
			client = s
		}
	}
	servers := sidecarSpans.GetSpans()
	if len(servers) != 1 {
		t.Fatalf("the sidecar recorded %d spans, want the Reconcile call's: %v", len(servers), servers)
	}
	server := servers[0]
	switch {
	case server.Name != "polyop.v1alpha1.SidecarService/Reconcile" || server.SpanKind != trace.SpanKindServer:
		t.Errorf("the sidecar's span is %q of kind %v, want the Reconcile server span", server.Name, server.SpanKind)
	case server.Parent.SpanID() != client.SpanContext.SpanID() || server.SpanContext.TraceID() != reconcile.SpanContext().TraceID():
		t.Errorf("the sidecar's span has parent %s in trace %s, want the host's client span %s in trace %s",
			server.Parent.SpanID(), server.SpanContext.TraceID(), client.SpanContext.SpanID(), reconcile.SpanContext().TraceID())
	case !inHandler.Equal(server.SpanContext):
		t.Errorf("trace.SpanFromContext in the handler gave %v, want the server span %v", inHandler, server.SpanContext)
	case !slices.Contains(server.Attributes, tracing.Name.String("set by the handler")):
		t.Errorf("the handler's attribute is not on the server span: %v", server.Attributes)
	}

	line := log.find("in the handler")
	want := map[string]any{
		"controller": "web", "kind": "Deployment", "namespace": "default", "name": "web",
		"reconcileID": "1b7a7e0e-0000-4000-8000-000000000001",
		"trace_id":    server.SpanContext.TraceID().String(), "span_id": server.SpanContext.SpanID().String(),
	}
	for k, v := range want {
		if line[k] != v {
			t.Errorf("the handler's log line has %s=%v, want %v (line %v)", k, line[k], v, line)
		}
	}
}

func TestWithoutTracingTheHandlerLogsNoTraceIDs(t *testing.T) {
	t.Parallel()
	var log lineLog
	address := serveOn(t, newDeploymentServer(t, log.logger(), func(ctx context.Context, _ *appsv1.Deployment) (sidecar.Result, error) {
		logf.FromContext(ctx).Info("in the handler")
		return sidecar.Result{}, nil
	}))
	raw, _ := json.Marshal(deployment(1))
	if _, err := polyopv1alpha1.NewSidecarServiceClient(dialPlain(t, address)).Reconcile(t.Context(), &polyopv1alpha1.ReconcileRequest{
		Controller: "web", Key: &polyopv1alpha1.ObjectKey{Namespace: "default", Name: "web"}, Object: raw,
	}); err != nil {
		t.Fatal(err)
	}
	line := log.find("in the handler")
	if line == nil || line["name"] != "web" || strings.Contains(strings.Join(keys(line), ","), "trace_id") {
		t.Errorf("log line %v, want one with the object's name and no trace_id", line)
	}
}

func keys(m map[string]any) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// The Reconcile span carries the request's polyop.* attributes and the
// call's result, as the host's reconcile span does.
func TestTheReconcileSpanCarriesTheRequestAndTheResult(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		result sidecar.Result
		err    error
		want   string
	}{
		{want: tracing.ResultSuccess},
		{result: sidecar.Result{RequeueAfter: time.Minute}, want: tracing.ResultRequeue},
		{err: errors.New("not yet"), want: tracing.ResultError},
		{err: reconcile.TerminalError(errors.New("never")), want: tracing.ResultTerminalError},
	} {
		t.Run(tc.want, func(t *testing.T) {
			t.Parallel()
			spans := tracetest.NewInMemoryExporter()
			var log lineLog
			opts := log.logger()
			opts.TracerProvider = sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans))
			address := serveOn(t, newDeploymentServer(t, opts, func(context.Context, *appsv1.Deployment) (sidecar.Result, error) {
				return tc.result, tc.err
			}))
			conn := dialPlain(t, address)
			raw, _ := json.Marshal(deployment(1))
			if _, err := polyopv1alpha1.NewSidecarServiceClient(conn).Reconcile(t.Context(), &polyopv1alpha1.ReconcileRequest{
				Controller: "web", Key: &polyopv1alpha1.ObjectKey{Namespace: "default", Name: "web"}, Object: raw, Retries: 2,
			}); err != nil {
				t.Fatal(err)
			}
			got := spans.GetSpans()
			if len(got) != 1 {
				t.Fatalf("the sidecar recorded %d spans, want the Reconcile call's", len(got))
			}
			for _, want := range []attribute.KeyValue{
				tracing.Controller.String("web"), tracing.Kind.String("Deployment"), tracing.Namespace.String("default"),
				tracing.Name.String("web"), tracing.Retries.Int(2), tracing.Result.String(tc.want),
			} {
				if !slices.Contains(got[0].Attributes, want) {
					t.Errorf("the span lacks %s=%s: %v", want.Key, want.Value.String(), got[0].Attributes)
				}
			}
		})
	}
}
