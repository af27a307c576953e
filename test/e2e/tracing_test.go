package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/polyop/polyop/internal/otlptest"
)

// The names of the spans of one reconcile, as the host and the Go SDK make
// them.
const (
	sidecarReconcileRPC = "polyop.v1alpha1.SidecarService/Reconcile"
	clusterListRPC      = "polyop.v1alpha1.ClusterService/List"
)

// TestOneReconcileIsOneTraceAcrossHostAndSidecar runs the host and a Go SDK
// sidecar (test/tracesidecar), both exporting spans to an in-process OTLP
// receiver, and reconciles a ConfigMap whose reconcile lists Secrets through
// the Cluster service and desires a Secret: the host's reconcile span is the
// root of one trace holding the sidecar call, the sidecar's handler, its
// Cluster call, the host's serving of that call, and the host's apply of the
// child.
func TestOneReconcileIsOneTraceAcrossHostAndSidecar(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	receiver := otlptest.Start(t)
	sc := f.startWith("sidecar", traceSidecarBin, receiver.Env("tracesidecar"), "--address", f.address())
	host := f.startHostWith(receiver.Env("polyop-host"))

	f.create(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "source"}, Data: map[string]string{"greeting": "hello"}})

	isReconcile := func(s otlptest.Span) bool {
		return s.Service == "polyop-host" && s.Name == "reconcile" && s.Attributes["polyop.name"] == "source" && s.Attributes["polyop.namespace"] == f.ns
	}
	spans := receiver.WaitForTrace(t, 2*time.Minute, isReconcile, func(spans []otlptest.Span) bool {
		return find(spans, "polyop-host", "server", clusterListRPC) != nil && find(spans, "polyop-host", "internal", "apply child") != nil
	})
	t.Logf("the span tree of one reconcile:\n%s", otlptest.Tree(spans))

	root := find(spans, "polyop-host", "internal", "reconcile")
	for k, want := range map[string]string{
		"polyop.controller": "copier", "polyop.kind": "ConfigMap", "polyop.retries": "0", "polyop.result": "success",
	} {
		if got := root.Attributes[k]; got != want {
			t.Errorf("the reconcile span has %s=%q, want %q", k, got, want)
		}
	}
	if root.ParentSpanID != "" || root.Attributes["polyop.reconcile_id"] == "" {
		t.Errorf("the reconcile span has parent %q and reconcile ID %q, want a root with an ID", root.ParentSpanID, root.Attributes["polyop.reconcile_id"])
	}
	// Each span's parent, down the hop and back.
	chain := []*otlptest.Span{
		root,
		find(spans, "polyop-host", "client", sidecarReconcileRPC),
		find(spans, "tracesidecar", "server", sidecarReconcileRPC),
		find(spans, "tracesidecar", "client", clusterListRPC),
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
	if handler := chain[2]; handler.Attributes["copier.secrets"] == "" {
		t.Errorf("the attribute the handler set on its span is missing: %v", handler.Attributes)
	}
	if apply := find(spans, "polyop-host", "internal", "apply child"); apply.ParentSpanID != root.SpanID || apply.Attributes["polyop.child"] != fmt.Sprintf("Secret %s/source-copy", f.ns) {
		t.Errorf("the apply span has parent %s and child %q, want the reconcile's %s and Secret %s/source-copy",
			apply.ParentSpanID, apply.Attributes["polyop.child"], root.SpanID, f.ns)
	}

	// The logs of both sides, inside the traced call, name the trace.
	handler := chain[2]
	sidecarLine := fmt.Sprintf(`"trace_id":"%s","span_id":"%s"`, handler.TraceID, handler.SpanID)
	if err := sc.WaitForOutput(ctxTimeout(t, time.Minute), sidecarLine); err != nil {
		t.Errorf("the sidecar's log inside the call does not carry %s: %v", sidecarLine, err)
	}
	if !strings.Contains(sc.Output(), `"reconcileID":"`+root.Attributes["polyop.reconcile_id"]+`"`) {
		t.Errorf("the sidecar's log does not carry the host's reconcileID %s", root.Attributes["polyop.reconcile_id"])
	}
	served := chain[4]
	clusterLine := fmt.Sprintf(`"reconcileID":"%s","trace_id":"%s","span_id":"%s"`, root.Attributes["polyop.reconcile_id"], served.TraceID, served.SpanID)
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
