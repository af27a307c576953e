package manifests_test

import (
	"bytes"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/polyop/polyop/internal/description"
	"github.com/polyop/polyop/internal/manifests"
	polyopv1alpha1 "github.com/polyop/polyop/sdk/go/gen/polyop/v1alpha1"
)

func webhookDescription() *description.Description {
	return &description.Description{
		Name: "widgets",
		Webhooks: []description.Webhook{
			{
				GVK: schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Widget"}, Default: true, Validate: true,
				Operations:    []polyopv1alpha1.Operation{polyopv1alpha1.Operation_OPERATION_CREATE, polyopv1alpha1.Operation_OPERATION_UPDATE, polyopv1alpha1.Operation_OPERATION_DELETE},
				FailurePolicy: polyopv1alpha1.FailurePolicy_FAILURE_POLICY_FAIL, TimeoutSeconds: 10,
			},
			{
				GVK: schema.GroupVersionKind{Version: "v1", Kind: "Pod"}, Resource: "pods", Validate: true,
				Operations:    []polyopv1alpha1.Operation{polyopv1alpha1.Operation_OPERATION_CREATE},
				FailurePolicy: polyopv1alpha1.FailurePolicy_FAILURE_POLICY_IGNORE, TimeoutSeconds: 3,
			},
		},
		Conversions: []description.Conversion{{GroupKind: schema.GroupKind{Group: "example.com", Kind: "Widget"}, Versions: []string{"v1", "v2"}}},
	}
}

// resolved resolves webhookDescription as `host webhooks` does, with the
// Service flags in svc.
func resolved(t *testing.T, svc description.ResolveOptions) *description.Resolved {
	t.Helper()
	desc := webhookDescription()
	res, err := description.Resolve(description.GuessingMapper(desc), desc, svc)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func TestWebhooksFromTheDescription(t *testing.T) {
	t.Parallel()
	objs, err := manifests.Webhooks(resolved(t, description.ResolveOptions{ServiceNamespace: "ops"}), manifests.WebhookOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(objs) != 3 {
		t.Fatalf("%d objects, want a mutating and a validating configuration and a CRD patch", len(objs))
	}
	mutating := objs[0].(*admissionregistrationv1.MutatingWebhookConfiguration)
	if mutating.Name != "widgets" || len(mutating.Webhooks) != 1 {
		t.Fatalf("mutating = %+v", mutating)
	}
	m := mutating.Webhooks[0]
	if m.Name != "mwidget-v1.example.com" || *m.ClientConfig.Service.Path != "/mutate-example-com-v1-widget" ||
		m.ClientConfig.Service.Name != "widgets-webhook" || m.ClientConfig.Service.Namespace != "ops" || *m.ClientConfig.Service.Port != 443 {
		t.Errorf("mutating webhook = %+v, %+v", m, m.ClientConfig.Service)
	}
	// Deletes are not defaulted.
	if ops := m.Rules[0].Operations; len(ops) != 2 || ops[0] != admissionregistrationv1.Create || ops[1] != admissionregistrationv1.Update {
		t.Errorf("mutating operations = %v", ops)
	}
	if *m.SideEffects != admissionregistrationv1.SideEffectClassNone || *m.MatchPolicy != admissionregistrationv1.Equivalent || *m.TimeoutSeconds != 10 {
		t.Errorf("mutating webhook settings = %+v", m)
	}

	validating := objs[1].(*admissionregistrationv1.ValidatingWebhookConfiguration)
	if len(validating.Webhooks) != 2 {
		t.Fatalf("validating = %+v", validating)
	}
	v := validating.Webhooks[0]
	if v.Name != "vwidget-v1.example.com" || len(v.Rules[0].Operations) != 3 || *v.FailurePolicy != admissionregistrationv1.Fail {
		t.Errorf("validating webhook = %+v", v)
	}
	pods := validating.Webhooks[1]
	if pods.Name != "vpod-v1.core.k8s.io" || *pods.ClientConfig.Service.Path != "/validate--v1-pod" ||
		pods.Rules[0].APIGroups[0] != "" || pods.Rules[0].Resources[0] != "pods" || *pods.FailurePolicy != admissionregistrationv1.Ignore || *pods.TimeoutSeconds != 3 {
		t.Errorf("pods webhook = %+v", pods)
	}

	crd := objs[2].(*unstructured.Unstructured)
	if crd.GetName() != "widgets.example.com" {
		t.Errorf("CRD patch for %s", crd.GetName())
	}
	path, _, _ := unstructured.NestedString(crd.Object, "spec", "conversion", "webhook", "clientConfig", "service", "path")
	strategy, _, _ := unstructured.NestedString(crd.Object, "spec", "conversion", "strategy")
	if path != "/convert" || strategy != "Webhook" {
		t.Errorf("CRD patch = %v", crd.Object)
	}
}

func TestWebhooksOptions(t *testing.T) {
	t.Parallel()
	selector := &metav1.LabelSelector{MatchLabels: map[string]string{"team": "a"}}
	objs, err := manifests.Webhooks(resolved(t, description.ResolveOptions{}), manifests.WebhookOptions{
		Name:              "custom",
		URL:               "https://127.0.0.1:9443/",
		FailurePolicy:     "Ignore",
		NamespaceSelector: selector,
		CABundle:          []byte("PEM"),
		InjectCAFrom:      "ops/serving-cert",
	})
	if err != nil {
		t.Fatal(err)
	}
	m := objs[0].(*admissionregistrationv1.MutatingWebhookConfiguration)
	if m.Name != "custom" || m.Annotations[manifests.CertManagerInjectAnnotation] != "ops/serving-cert" {
		t.Errorf("metadata = %+v", m.ObjectMeta)
	}
	w := m.Webhooks[0]
	if w.ClientConfig.Service != nil || *w.ClientConfig.URL != "https://127.0.0.1:9443/mutate-example-com-v1-widget" ||
		string(w.ClientConfig.CABundle) != "PEM" || *w.FailurePolicy != admissionregistrationv1.Ignore || w.NamespaceSelector != selector {
		t.Errorf("webhook = %+v", w)
	}
	crd := objs[2].(*unstructured.Unstructured)
	url, _, _ := unstructured.NestedString(crd.Object, "spec", "conversion", "webhook", "clientConfig", "url")
	bundle, _, _ := unstructured.NestedString(crd.Object, "spec", "conversion", "webhook", "clientConfig", "caBundle")
	if url != "https://127.0.0.1:9443/convert" || bundle != "UEVN" {
		t.Errorf("CRD clientConfig url %q, caBundle %q", url, bundle)
	}

	var out bytes.Buffer
	if err := manifests.WriteYAML(&out, objs); err != nil {
		t.Fatal(err)
	}
	if strings.Count(out.String(), "\n---\n") != 2 || strings.Contains(out.String(), "creationTimestamp") {
		t.Errorf("YAML:\n%s", out.String())
	}
}

func TestWebhooksRefusesBadOptions(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		opts    manifests.WebhookOptions
		service string
	}{
		"if the failure policy is unknown, then it fails":       {opts: manifests.WebhookOptions{FailurePolicy: "Sometimes"}},
		"if the URL is not https, then it fails":                {opts: manifests.WebhookOptions{URL: "http://127.0.0.1:9443"}},
		"if inject-ca-from has no namespace, then it fails":     {opts: manifests.WebhookOptions{InjectCAFrom: "cert"}},
		"if the service name is not a DNS label, then it fails": {service: "Web_hook"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			if _, err := manifests.Webhooks(resolved(t, description.ResolveOptions{ServiceName: tc.service}), tc.opts); err == nil {
				t.Error("no error")
			}
		})
	}
}
