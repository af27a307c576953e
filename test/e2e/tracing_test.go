package e2e

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/polyop/polyop/internal/otlptest"
	"github.com/polyop/polyop/internal/testenv"
)

// The names of the spans of one reconcile, as the host and the SDKs make
// them.
const (
	sidecarReconcileRPC = "polyop.v1alpha1.SidecarService/Reconcile"
	clusterListRPC      = "polyop.v1alpha1.ClusterService/List"
)

// TestOneReconcileIsOneTraceAcrossHostAndSidecar runs the host and a Go SDK
// sidecar (testsidecar trace), both exporting spans to an in-process OTLP
// receiver, and reconciles a ConfigMap whose reconcile lists Secrets through
// the Cluster service and desires a Secret: the host's reconcile span is the
// root of one trace holding the sidecar call, the sidecar's handler, its
// Cluster call, the host's serving of that call, and the host's apply of the
// child.
func TestOneReconcileIsOneTraceAcrossHostAndSidecar(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	receiver := otlptest.Start(t)
	sc := f.startWith("sidecar", testSidecarBin, receiver.Env("tracesidecar"), "trace", "--address", f.address())
	checkOneReconcileTrace(t, f, receiver, tracedSidecar{
		service: "tracesidecar",
		process: sc,
		// logr's JSON: the handler's logger carries the host's keys.
		logLine: func(traceID, spanID string) string {
			return fmt.Sprintf(`"trace_id":"%s","span_id":"%s"`, traceID, spanID)
		},
		reconcileID: func(id string) string { return `"reconcileID":"` + id + `"` },
	})
}

// TestOneReconcileIsOneTraceAcrossHostAndPythonSidecar is
// TestOneReconcileIsOneTraceAcrossHostAndSidecar with the same sidecar
// written with the Python SDK (testdata/python/tracesidecar.py), run from
// .venv with the polyop[otlp] extra: its handler's span carries the polyop.*
// attributes of the host's spans, and ctx.log's lines the trace and span IDs.
func TestOneReconcileIsOneTraceAcrossHostAndPythonSidecar(t *testing.T) {
	t.Parallel()
	py := python(t)
	f := newFixture(t)
	receiver := otlptest.Start(t)
	script := filepath.Join(testenv.RepoRoot(), "test", "e2e", "testdata", "python", "tracesidecar.py")
	sc := f.startWith("sidecar", py, receiver.Env("tracesidecar-python"), script, "--address", f.address())
	if err := sc.WaitForOutput(ctxTimeout(t, 2*time.Minute), "Serving on "); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(sc.Output(), "tracing on") {
		t.Fatalf("the Python sidecar serves with tracing off (is the polyop[otlp] extra in .venv? run make .venv):\n%s", sc.Output())
	}
	checkOneReconcileTrace(t, f, receiver, tracedSidecar{
		service: "tracesidecar-python",
		process: sc,
		// ctx.log's keys, at the end of the message.
		logLine:     func(traceID, spanID string) string { return fmt.Sprintf("trace_id=%s span_id=%s", traceID, spanID) },
		reconcileID: func(id string) string { return "reconcileID=" + id },
	})
}

// TestOneReconcileIsOneTraceAcrossHostAndTypeScriptSidecar is
// TestOneReconcileIsOneTraceAcrossHostAndSidecar with the same sidecar
// written with the TypeScript SDK (testdata/typescript/tracesidecar.mjs): its
// handler's span carries the polyop.* attributes, and its JSON log lines the
// trace and span IDs.
func TestOneReconcileIsOneTraceAcrossHostAndTypeScriptSidecar(t *testing.T) {
	t.Parallel()
	nodeBin := node(t)
	f := newFixture(t)
	receiver := otlptest.Start(t)
	script := filepath.Join(testenv.RepoRoot(), "test", "e2e", "testdata", "typescript", "tracesidecar.mjs")
	sc := f.startWith("sidecar", nodeBin, receiver.Env("tracesidecar-typescript"), script, f.address())
	if err := sc.WaitForOutput(ctxTimeout(t, 2*time.Minute), `"msg":"Serving"`); err != nil {
		t.Fatal(err)
	}
	checkOneReconcileTrace(t, f, receiver, tracedSidecar{
		service: "tracesidecar-typescript",
		process: sc,
		// ctx.log's JSON fields.
		logLine: func(traceID, spanID string) string {
			return fmt.Sprintf(`"trace_id":"%s","span_id":"%s"`, traceID, spanID)
		},
		reconcileID: func(id string) string { return `"reconcileID":"` + id + `"` },
	})
}

// tracedSidecar is a sidecar of the tracing tests: a controller "copier" of
// ConfigMaps whose reconcile lists the namespace's Secrets through the
// Cluster service, sets the attribute copier.secrets on its span, logs one
// line, and desires the Secret "<name>-copy".
type tracedSidecar struct {
	// service is the service.name of its spans (OTEL_SERVICE_NAME).
	service string
	process *testenv.Process
	// logLine is the text of its log line inside the handler's span
	// traceID/spanID; reconcileID that of a log line of the reconcile id.
	logLine     func(traceID, spanID string) string
	reconcileID func(id string) string
}

// checkOneReconcileTrace starts the host exporting to receiver, creates the
// ConfigMap "source" and checks that its reconcile is one trace across the
// host and sc, printing the trace's tree: host reconcile span → host client
// span of the sidecar call → sidecar server span → sidecar client span of the
// Cluster call → host server span of that call, and the host's apply of the
// child under the reconcile span; and that both sides' log lines inside the
// reconcile carry its trace and span IDs.
func checkOneReconcileTrace(t *testing.T, f *fixture, receiver *otlptest.Receiver, sc tracedSidecar) {
	t.Helper()
	host := f.startHostWith(receiver.Env("polyop-host"))
	f.create(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "source"}, Data: map[string]string{"greeting": "hello"}})

	isReconcile := func(s otlptest.Span) bool {
		return s.Service == "polyop-host" && s.Name == "reconcile" && s.Attributes["polyop.name"] == "source" && s.Attributes["polyop.namespace"] == f.ns
	}
	spans := receiver.WaitForTrace(t, 2*time.Minute, isReconcile, func(spans []otlptest.Span) bool {
		return find(spans, "polyop-host", "server", clusterListRPC) != nil && find(spans, "polyop-host", "internal", "apply child") != nil &&
			find(spans, sc.service, "server", sidecarReconcileRPC) != nil
	})
	t.Logf("the span tree of one reconcile:\n%s", otlptest.Tree(spans))

	root := find(spans, "polyop-host", "internal", "reconcile")
	reconcileID := root.Attributes["polyop.reconcile_id"]
	for k, want := range map[string]string{
		"polyop.controller": "copier", "polyop.kind": "ConfigMap", "polyop.retries": "0", "polyop.result": "success",
	} {
		if got := root.Attributes[k]; got != want {
			t.Errorf("the reconcile span has %s=%q, want %q", k, got, want)
		}
	}
	if root.ParentSpanID != "" || reconcileID == "" {
		t.Errorf("the reconcile span has parent %q and reconcile ID %q, want a root with an ID", root.ParentSpanID, reconcileID)
	}
	// Each span's parent, down the hop and back.
	chain := []*otlptest.Span{
		root,
		find(spans, "polyop-host", "client", sidecarReconcileRPC),
		find(spans, sc.service, "server", sidecarReconcileRPC),
		find(spans, sc.service, "client", clusterListRPC),
		find(spans, "polyop-host", "server", clusterListRPC),
	}
	for i := 1; i < len(chain); i++ {
		if chain[i] == nil {
			t.Fatalf("span %d of the chain is missing", i)
		}
		if chain[i].ParentSpanID != chain[i-1].SpanID {
			t.Errorf("%s [%s, %s] has parent %s, want %s [%s, %s]", chain[i].Name, chain[i].Service, chain[i].Kind,
				chain[i].ParentSpanID, chain[i-1].Name, chain[i-1].Service, chain[i-1].Kind)
		}
	}
	handler := chain[2]
	if handler.Attributes["copier.secrets"] == "" {
		t.Errorf("the attribute the handler set on its span is missing: %v", handler.Attributes)
	}
	// Its handler's span carries the polyop.* attributes of the host's.
	for k, want := range map[string]string{
		"polyop.controller": "copier", "polyop.kind": "ConfigMap", "polyop.namespace": f.ns, "polyop.name": "source",
		"polyop.reconcile_id": reconcileID, "polyop.result": "success",
	} {
		if got := handler.Attributes[k]; got != want {
			t.Errorf("the sidecar's span has %s=%q, want %q", k, got, want)
		}
	}
	if apply := find(spans, "polyop-host", "internal", "apply child"); apply.ParentSpanID != root.SpanID || apply.Attributes["polyop.child"] != fmt.Sprintf("Secret %s/source-copy", f.ns) {
		t.Errorf("the apply span has parent %s and child %q, want the reconcile's %s and Secret %s/source-copy",
			apply.ParentSpanID, apply.Attributes["polyop.child"], root.SpanID, f.ns)
	}

	// The logs of both sides, inside the traced call, name the trace.
	sidecarLine := sc.logLine(handler.TraceID, handler.SpanID)
	if err := sc.process.WaitForOutput(ctxTimeout(t, time.Minute), sidecarLine); err != nil {
		t.Errorf("the sidecar's log inside the call does not carry %s: %v", sidecarLine, err)
	}
	if !strings.Contains(sc.process.Output(), sc.reconcileID(reconcileID)) {
		t.Errorf("the sidecar's log does not carry the host's reconcileID %s", reconcileID)
	}
	served := chain[4]
	clusterLine := fmt.Sprintf(`"reconcileID":"%s","trace_id":"%s","span_id":"%s"`, reconcileID, served.TraceID, served.SpanID)
	if err := host.WaitForOutput(ctxTimeout(t, time.Minute), clusterLine); err != nil {
		t.Errorf("the host's log of the Cluster call does not carry %s: %v", clusterLine, err)
	}
	hostLine := fmt.Sprintf(`"trace_id":"%s","span_id":"%s"`, root.TraceID, root.SpanID)
	if err := host.WaitForOutput(ctxTimeout(t, time.Minute), hostLine); err != nil {
		t.Errorf("the host's log inside the reconcile does not carry %s: %v", hostLine, err)
	}
}

// find returns the first span of spans from service, of kind, named name.
func find(spans []otlptest.Span, service, kind, name string) *otlptest.Span {
	for i, s := range spans {
		if s.Service == service && s.Kind == kind && s.Name == name {
			return &spans[i]
		}
	}
	return nil
}
