// Package otlptest is an in-process OTLP trace receiver for tests: a gRPC
// server implementing the OpenTelemetry collector's TraceService, which keeps
// every span it is sent, and helpers to find a trace and print its tree.
//
// Point a process at it with Receiver.Env, which sets the standard OTEL_*
// variables any OpenTelemetry SDK (Go, Python, TypeScript) reads:
//
//	r := otlptest.Start(t)
//	p, _ := testenv.StartProcessWith("host", bin, args, testenv.ProcessOptions{Env: r.Env("polyop-host")})
//	spans := r.WaitForTrace(t, time.Minute, func(s otlptest.Span) bool { return s.Name == "reconcile" })
//	t.Log(otlptest.Tree(spans))
package otlptest

import (
	"context"
	"encoding/hex"
	"fmt"
	"net"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	collectortracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
	"k8s.io/apimachinery/pkg/util/wait"
)

// Span is one span as the receiver got it, with its IDs in hex.
type Span struct {
	TraceID, SpanID, ParentSpanID string
	// Service is the service.name of the process that sent it.
	Service string
	Name    string
	// Kind is "internal", "server", "client", "producer" or "consumer".
	Kind string
	// Attributes are the span's attributes, each value as a string.
	Attributes map[string]string
	// Error is true for a span whose status is Error, with its message in
	// StatusMessage.
	Error         bool
	StatusMessage string
	Start, End    time.Time
	// Links are the span IDs (trace ID/span ID, in hex) the span links to.
	Links []string
}

// Receiver is an OTLP/gRPC trace receiver listening on a loopback port.
type Receiver struct {
	collectortracepb.UnimplementedTraceServiceServer
	address string

	mu    sync.Mutex
	spans []Span
}

// Start starts a receiver on a free loopback port; it stops when the test
// ends.
func Start(t testing.TB) *Receiver {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &Receiver{address: lis.Addr().String()}
	srv := grpc.NewServer()
	collectortracepb.RegisterTraceServiceServer(srv, r)
	served := make(chan struct{})
	go func() { defer close(served); _ = srv.Serve(lis) }()
	t.Cleanup(func() { srv.Stop(); <-served })
	return r
}

// Endpoint is the receiver's OTLP endpoint, as OTEL_EXPORTER_OTLP_ENDPOINT
// takes it (plain text: the scheme is http).
func (r *Receiver) Endpoint() string { return "http://" + r.address }

// Env returns the OTEL_* variables that make an OpenTelemetry SDK export
// every span to the receiver over gRPC, soon after it ends, as service.
func (r *Receiver) Env(service string) []string {
	return []string{
		"OTEL_EXPORTER_OTLP_ENDPOINT=" + r.Endpoint(),
		"OTEL_EXPORTER_OTLP_PROTOCOL=grpc",
		"OTEL_EXPORTER_OTLP_INSECURE=true",
		"OTEL_TRACES_EXPORTER=otlp",
		"OTEL_TRACES_SAMPLER=always_on",
		"OTEL_SERVICE_NAME=" + service,
		// Export within 100ms of a span's end rather than 5s.
		"OTEL_BSP_SCHEDULE_DELAY=100",
		// Metrics and logs are not received here.
		"OTEL_METRICS_EXPORTER=none",
		"OTEL_LOGS_EXPORTER=none",
	}
}

// Export implements the collector's TraceService.
func (r *Receiver) Export(_ context.Context, req *collectortracepb.ExportTraceServiceRequest) (*collectortracepb.ExportTraceServiceResponse, error) {
	var got []Span
	for _, rs := range req.GetResourceSpans() {
		service := attributes(rs.GetResource().GetAttributes())["service.name"]
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				got = append(got, spanOf(service, s))
			}
		}
	}
	r.mu.Lock()
	r.spans = append(r.spans, got...)
	r.mu.Unlock()
	return &collectortracepb.ExportTraceServiceResponse{}, nil
}

func spanOf(service string, s *tracepb.Span) Span {
	out := Span{
		TraceID:       hex.EncodeToString(s.GetTraceId()),
		SpanID:        hex.EncodeToString(s.GetSpanId()),
		ParentSpanID:  hex.EncodeToString(s.GetParentSpanId()),
		Service:       service,
		Name:          s.GetName(),
		Kind:          strings.ToLower(strings.TrimPrefix(s.GetKind().String(), "SPAN_KIND_")),
		Attributes:    attributes(s.GetAttributes()),
		Error:         s.GetStatus().GetCode() == tracepb.Status_STATUS_CODE_ERROR,
		StatusMessage: s.GetStatus().GetMessage(),
		Start:         time.Unix(0, int64(s.GetStartTimeUnixNano())),
		End:           time.Unix(0, int64(s.GetEndTimeUnixNano())),
	}
	for _, l := range s.GetLinks() {
		out.Links = append(out.Links, hex.EncodeToString(l.GetTraceId())+"/"+hex.EncodeToString(l.GetSpanId()))
	}
	return out
}

func attributes(kvs []*commonpb.KeyValue) map[string]string {
	m := make(map[string]string, len(kvs))
	for _, kv := range kvs {
		m[kv.GetKey()] = valueString(kv.GetValue())
	}
	return m
}

func valueString(v *commonpb.AnyValue) string {
	switch x := v.GetValue().(type) {
	case *commonpb.AnyValue_StringValue:
		return x.StringValue
	case *commonpb.AnyValue_IntValue:
		return fmt.Sprint(x.IntValue)
	case *commonpb.AnyValue_BoolValue:
		return fmt.Sprint(x.BoolValue)
	case *commonpb.AnyValue_DoubleValue:
		return fmt.Sprint(x.DoubleValue)
	}
	return v.String()
}

// Spans returns every span received so far.
func (r *Receiver) Spans() []Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.spans)
}

// Trace returns the spans received so far of the trace traceID.
func (r *Receiver) Trace(traceID string) []Span {
	var out []Span
	for _, s := range r.Spans() {
		if s.TraceID == traceID {
			out = append(out, s)
		}
	}
	return out
}

// WaitForTrace waits up to timeout for a trace with a span root matches
// (the first such span received) for which complete returns true, and
// returns its spans. It fails the test, with what it received, otherwise.
func (r *Receiver) WaitForTrace(t testing.TB, timeout time.Duration, root func(Span) bool, complete func([]Span) bool) []Span {
	t.Helper()
	var spans []Span
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		for _, s := range r.Spans() {
			if root(s) {
				spans = r.Trace(s.TraceID)
				if complete(spans) {
					return true, nil
				}
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("no complete trace within %s; received %d spans:\n%s", timeout, len(r.Spans()), Tree(r.Spans()))
	}
	return spans
}

// Parent returns the span of spans that is s's parent.
func Parent(spans []Span, s Span) (Span, bool) {
	for _, p := range spans {
		if p.SpanID == s.ParentSpanID && p.TraceID == s.TraceID {
			return p, true
		}
	}
	return Span{}, false
}

// Tree prints spans as indented trees, one line per span (service, kind,
// name, and the polyop.* attributes), children under their parent in order
// of start.
func Tree(spans []Span) string {
	children := map[string][]Span{}
	ids := map[string]bool{}
	for _, s := range spans {
		ids[s.TraceID+s.SpanID] = true
	}
	var roots []Span
	for _, s := range spans {
		if s.ParentSpanID == "" || !ids[s.TraceID+s.ParentSpanID] {
			roots = append(roots, s)
			continue
		}
		children[s.TraceID+s.ParentSpanID] = append(children[s.TraceID+s.ParentSpanID], s)
	}
	byStart := func(list []Span) {
		sort.SliceStable(list, func(i, j int) bool { return list[i].Start.Before(list[j].Start) })
	}
	byStart(roots)
	var b strings.Builder
	var walk func(s Span, depth int)
	walk = func(s Span, depth int) {
		fmt.Fprintf(&b, "%s%s [%s, %s]%s\n", strings.Repeat("  ", depth), s.Name, s.Service, s.Kind, describe(s))
		kids := children[s.TraceID+s.SpanID]
		byStart(kids)
		for _, k := range kids {
			walk(k, depth+1)
		}
	}
	for _, s := range roots {
		walk(s, 0)
	}
	return b.String()
}

func describe(s Span) string {
	var parts []string
	keys := make([]string, 0, len(s.Attributes))
	for k := range s.Attributes {
		if strings.HasPrefix(k, "polyop.") {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		parts = append(parts, k+"="+s.Attributes[k])
	}
	if s.Error {
		parts = append(parts, "error="+fmt.Sprintf("%q", s.StatusMessage))
	}
	parts = append(parts, s.End.Sub(s.Start).Round(10*time.Microsecond).String())
	return " " + strings.Join(parts, " ")
}
