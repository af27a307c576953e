package sidecar

import (
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"

	polyopv1alpha1 "github.com/polyop/polyop/sdk/go/gen/polyop/v1alpha1"
)

// FuzzNewDescription validates arbitrary DescribeResponses (protobuf wire
// bytes, as a sidecar sends them) and checks that what is accepted holds
// what the rest of the host relies on: valid, unique names; kinds with a
// version and a kind; at least one reconcile at a time; known, distinct
// filters and operations; one mapping per watch; a failure policy and a
// timeout the API server accepts; conversions between two versions or more.
// It then narrows the description to host namespaces and checks that
// narrowing never widens.
func FuzzNewDescription(f *testing.F) {
	cm := &polyopv1alpha1.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}
	full := validResponse()
	full.Controllers[0].MaxConcurrentReconciles = 4
	full.Controllers[0].Finalizer = "example.com/cleanup"
	full.Controllers[0].Owns = []*polyopv1alpha1.OwnedKind{{Kind: cm, SendObserved: true}}
	full.Controllers[0].Watches = []*polyopv1alpha1.Watch{
		{Kind: cm, Mapping: &polyopv1alpha1.Watch_Label{Label: "example.com/widget"}},
		{Kind: &polyopv1alpha1.GroupVersionKind{Version: "v1", Kind: "Secret"}, Mapping: &polyopv1alpha1.Watch_FieldPath{FieldPath: "spec.secretName"}},
		{Kind: &polyopv1alpha1.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}, Mapping: &polyopv1alpha1.Watch_Annotation{Annotation: "widget"}},
	}
	full.Webhooks = []*polyopv1alpha1.WebhookDescription{{
		Kind: full.Controllers[0].ForKind, Resource: "widgets", Default: true, Validate: true,
		Operations:     []polyopv1alpha1.Operation{polyopv1alpha1.Operation_OPERATION_CREATE, polyopv1alpha1.Operation_OPERATION_DELETE},
		FailurePolicy:  polyopv1alpha1.FailurePolicy_FAILURE_POLICY_IGNORE,
		TimeoutSeconds: 5,
	}}
	full.Conversions = []*polyopv1alpha1.ConversionDescription{{Kind: &polyopv1alpha1.GroupKind{Group: "example.com", Kind: "Widget"}, Versions: []string{"v1", "v2"}}}
	webhookOnly := &polyopv1alpha1.DescribeResponse{ProtocolVersion: ProtocolVersion, Name: "hooks", Webhooks: full.Webhooks}
	conversionOnly := &polyopv1alpha1.DescribeResponse{ProtocolVersion: ProtocolVersion, Name: "conv", Conversions: full.Conversions}
	for _, seed := range []struct {
		resp *polyopv1alpha1.DescribeResponse
		host string
	}{
		{validResponse(), ""},
		{validResponse(), "a,c"},
		{validResponse(), "c"},
		{full, "b"},
		{webhookOnly, ""},
		{conversionOnly, ""},
		{&polyopv1alpha1.DescribeResponse{ProtocolVersion: 2}, ""},
		{&polyopv1alpha1.DescribeResponse{}, ""},
	} {
		raw, err := proto.Marshal(seed.resp)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(raw, seed.host)
	}
	f.Fuzz(func(t *testing.T, raw []byte, host string) {
		resp := &polyopv1alpha1.DescribeResponse{}
		if proto.Unmarshal(raw, resp) != nil {
			return
		}
		d, err := NewDescription(resp)
		if err != nil {
			if msg := err.Error(); !strings.HasPrefix(msg, "invalid sidecar description: ") && !strings.HasPrefix(msg, "protocol version mismatch: ") {
				t.Fatalf("%v: error %q", resp, msg)
			}
			return
		}
		checkDescription(t, resp, d)

		var hostNamespaces []string
		if host != "" {
			hostNamespaces = strings.Split(host, ",")
		}
		declared := make([][]string, len(d.Controllers))
		for i, c := range d.Controllers {
			declared[i] = slices.Clone(c.Namespaces)
		}
		narrowErr := d.Narrow(hostNamespaces, nil)
		var emptied bool
		for i, c := range d.Controllers {
			for _, ns := range c.Namespaces {
				if len(declared[i]) > 0 && !slices.Contains(declared[i], ns) || len(hostNamespaces) > 0 && !slices.Contains(hostNamespaces, ns) {
					t.Fatalf("controller %q declares namespaces %q, the host allows %q, and narrowing gave %q", c.Name, declared[i], hostNamespaces, c.Namespaces)
				}
			}
			if len(hostNamespaces) > 0 && len(c.Namespaces) == 0 {
				emptied = true
			}
		}
		if emptied != (narrowErr != nil) {
			t.Fatalf("narrowing to %q: error %v, yet a controller was left with no namespace: %v", hostNamespaces, narrowErr, emptied)
		}
	})
}

// checkDescription checks what NewDescription accepted from resp.
func checkDescription(t *testing.T, resp *polyopv1alpha1.DescribeResponse, d *Description) {
	t.Helper()
	fail := func(format string, args ...any) {
		t.Helper()
		t.Fatalf("%v: accepted, yet "+format, append([]any{resp}, args...)...)
	}
	if len(validation.IsDNS1123Label(d.Name)) > 0 {
		fail("its name %q is not a DNS label", d.Name)
	}
	if len(d.Controllers)+len(d.Webhooks)+len(d.Conversions) == 0 {
		fail("it declares nothing")
	}
	names := map[string]bool{}
	for _, c := range d.Controllers {
		if len(validation.IsDNS1123Subdomain(c.Name)) > 0 || len(c.Name) > 63 || names[c.Name] {
			fail("controller name %q is invalid, too long or taken", c.Name)
		}
		names[c.Name] = true
		if c.GVK.Version == "" || c.GVK.Kind == "" {
			fail("controller %q reconciles %v", c.Name, c.GVK)
		}
		if c.MaxConcurrentReconciles < 1 || c.LabelSelector == nil {
			fail("controller %q has %d reconciles at a time, selector %v", c.Name, c.MaxConcurrentReconciles, c.LabelSelector)
		}
		for i, f := range c.UpdateFilters {
			if _, known := polyopv1alpha1.UpdateFilter_name[int32(f)]; !known || f == polyopv1alpha1.UpdateFilter_UPDATE_FILTER_UNSPECIFIED || slices.Contains(c.UpdateFilters[:i], f) {
				fail("controller %q has update filters %v", c.Name, c.UpdateFilters)
			}
		}
		for _, ns := range c.Namespaces {
			if len(validation.IsDNS1123Label(ns)) > 0 {
				fail("controller %q watches namespace %q", c.Name, ns)
			}
		}
		for i, o := range c.Owns {
			if o.GVK.Version == "" || o.GVK.Kind == "" || slices.ContainsFunc(c.Owns[:i], func(p Owned) bool { return p.GVK == o.GVK }) {
				fail("controller %q owns %v", c.Name, c.Owns)
			}
		}
		for _, w := range c.Watches {
			set := 0
			for _, s := range []bool{w.Label != "", w.Annotation != "", len(w.FieldPath) > 0} {
				if s {
					set++
				}
			}
			if set != 1 || w.GVK.Version == "" || w.GVK.Kind == "" || slices.Contains(w.FieldPath, "") {
				fail("controller %q has watch %+v", c.Name, w)
			}
			if w.Label != "" && len(validation.IsQualifiedName(w.Label)) > 0 || w.Annotation != "" && len(validation.IsQualifiedName(w.Annotation)) > 0 {
				fail("controller %q watches by key %q%q", c.Name, w.Label, w.Annotation)
			}
		}
		if f := c.Finalizer; f != "" && (len(validation.IsQualifiedName(f)) > 0 || !strings.Contains(f, "/")) {
			fail("controller %q has finalizer %q", c.Name, f)
		}
		if _, err := labels.Parse(c.LabelSelector.String()); err != nil {
			fail("controller %q has selector %q, which does not parse back: %v", c.Name, c.LabelSelector, err)
		}
	}
	for i, w := range d.Webhooks {
		if w.GVK.Version == "" || w.GVK.Kind == "" || slices.ContainsFunc(d.Webhooks[:i], func(o Webhook) bool { return o.GVK == w.GVK }) {
			fail("webhook %d is for %v", i, w.GVK)
		}
		if !w.Default && !w.Validate {
			fail("webhook %d does nothing", i)
		}
		if len(w.Operations) == 0 {
			fail("webhook %d admits no operation", i)
		}
		for j, op := range w.Operations {
			if _, known := polyopv1alpha1.Operation_name[int32(op)]; !known || op == polyopv1alpha1.Operation_OPERATION_UNSPECIFIED || slices.Contains(w.Operations[:j], op) {
				fail("webhook %d admits %v", i, w.Operations)
			}
		}
		if w.FailurePolicy != polyopv1alpha1.FailurePolicy_FAILURE_POLICY_FAIL && w.FailurePolicy != polyopv1alpha1.FailurePolicy_FAILURE_POLICY_IGNORE {
			fail("webhook %d has failure policy %v", i, w.FailurePolicy)
		}
		if w.TimeoutSeconds < 1 || w.TimeoutSeconds > 30 {
			fail("webhook %d has timeout %d", i, w.TimeoutSeconds)
		}
	}
	for i, c := range d.Conversions {
		if c.GroupKind.Group == "" || c.GroupKind.Kind == "" || slices.ContainsFunc(d.Conversions[:i], func(o Conversion) bool { return o.GroupKind == c.GroupKind }) {
			fail("conversion %d is for %v", i, c.GroupKind)
		}
		distinct := map[string]bool{}
		for _, v := range c.Versions {
			if len(validation.IsDNS1035Label(v)) > 0 {
				fail("conversion %d has version %q, not a version name", i, v)
			}
			distinct[v] = true
		}
		if len(distinct) < 2 {
			fail("conversion %d converts between %q", i, c.Versions)
		}
	}
}
