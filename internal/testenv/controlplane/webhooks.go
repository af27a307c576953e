package controlplane

import (
	"context"
	"os"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"
)

// InstallWebhookManifests installs the one mutating and the one validating
// webhook configuration of the manifests file at path (as controller-gen
// writes them from kubebuilder's markers) into the API server of cfg, each
// renamed name and admitting namespace only (tests share the API server),
// pointing at a webhook server on the local host: the options it returns say
// where that server must listen, with which certificate. The configurations
// are deleted when the test ends.
func InstallWebhookManifests(t *testing.T, cfg *rest.Config, c client.Client, path, name, namespace string) *envtest.WebhookInstallOptions {
	t.Helper()
	opts := &envtest.WebhookInstallOptions{LocalServingHost: "127.0.0.1"}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	selector := &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": namespace}}
	for _, doc := range strings.Split(string(data), "\n---\n") {
		switch {
		case strings.Contains(doc, "kind: MutatingWebhookConfiguration"):
			wc := &admissionregistrationv1.MutatingWebhookConfiguration{}
			if err := yaml.UnmarshalStrict([]byte(doc), wc); err != nil {
				t.Fatal(err)
			}
			wc.Name = name
			for i := range wc.Webhooks {
				wc.Webhooks[i].NamespaceSelector = selector
			}
			opts.MutatingWebhooks = append(opts.MutatingWebhooks, wc)
		case strings.Contains(doc, "kind: ValidatingWebhookConfiguration"):
			wc := &admissionregistrationv1.ValidatingWebhookConfiguration{}
			if err := yaml.UnmarshalStrict([]byte(doc), wc); err != nil {
				t.Fatal(err)
			}
			wc.Name = name
			for i := range wc.Webhooks {
				wc.Webhooks[i].NamespaceSelector = selector
			}
			opts.ValidatingWebhooks = append(opts.ValidatingWebhooks, wc)
		}
	}
	if len(opts.MutatingWebhooks) != 1 || len(opts.ValidatingWebhooks) != 1 {
		t.Fatalf("%s has %d mutating and %d validating configurations, want one of each",
			path, len(opts.MutatingWebhooks), len(opts.ValidatingWebhooks))
	}
	if err := opts.Install(cfg); err != nil {
		t.Fatalf("installing the webhook configurations of %s: %v", path, err)
	}
	t.Cleanup(func() {
		for _, wc := range opts.MutatingWebhooks {
			_ = c.Delete(context.Background(), wc)
		}
		for _, wc := range opts.ValidatingWebhooks {
			_ = c.Delete(context.Background(), wc)
		}
		_ = opts.Cleanup()
	})
	return opts
}
