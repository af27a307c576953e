package host

import (
	"flag"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/polyop/polyop/internal/description"
)

func TestWebhookFlags(t *testing.T) {
	t.Parallel()
	o := NewOptions()
	fs := flag.NewFlagSet("host", flag.ContinueOnError)
	o.BindFlags(fs)
	if o.Webhook.Port != 9443 || o.Webhook.EnableHTTP2 || o.Webhook.AdmissionTimeout != 3*time.Second || o.Webhook.SelfSigned {
		t.Errorf("defaults = %+v", o.Webhook)
	}
	err := fs.Parse([]string{
		"--webhook-port", "10443", "--webhook-enable-http2", "--admission-timeout", "2s", "--conversion-timeout", "5s",
		"--webhook-self-signed", "--webhook-cert-hosts", "127.0.0.1,localhost", "--webhook-cert-hosts", "::1",
		"--webhook-service-name", "svc", "--webhook-service-namespace", "ops", "--webhook-configuration-name", "cfg",
	})
	if err != nil {
		t.Fatal(err)
	}
	w := o.Webhook
	if w.Port != 10443 || !w.EnableHTTP2 || w.AdmissionTimeout != 2*time.Second || w.ConversionTimeout != 5*time.Second || !w.SelfSigned ||
		strings.Join(w.CertHosts, ",") != "127.0.0.1,localhost,::1" || w.ServiceName != "svc" || w.ServiceNamespace != "ops" || w.ConfigurationName != "cfg" {
		t.Errorf("parsed = %+v", w)
	}
}

func TestWebhookOptionsDefaultFromTheSidecarsName(t *testing.T) {
	t.Parallel()
	o := WebhookOptions{ServiceNamespace: "ops"}.withDefaults("widgets")
	if o.ServiceName != "widgets-webhook" || o.CertSecret != "widgets-webhook-cert" || o.ConfigurationName != "widgets" || o.CertName != "tls.crt" || o.CertDir == "" {
		t.Errorf("defaults = %+v", o)
	}
}

func TestResolveWebhookKinds(t *testing.T) {
	t.Parallel()
	widget := schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Widget"}
	mapper := meta.NewDefaultRESTMapper([]schema.GroupVersion{widget.GroupVersion()})
	mapper.Add(widget, meta.RESTScopeNamespace)
	desc := &description.Description{
		Webhooks:    []description.Webhook{{GVK: widget, Validate: true}},
		Conversions: []description.Conversion{{GroupKind: widget.GroupKind(), Versions: []string{"v1", "v2"}}},
	}
	crds, err := resolveWebhookKinds(mapper, desc)
	if err != nil || strings.Join(crds, ",") != "widgets.example.com" {
		t.Errorf("resolveWebhookKinds = %v, %v", crds, err)
	}

	desc.Webhooks = append(desc.Webhooks, description.Webhook{GVK: schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Gadget"}})
	desc.Webhooks[0].Resource = "widgetz"
	_, err = resolveWebhookKinds(mapper, desc)
	for _, want := range []string{
		"the sidecar declares a webhook for Gadget.example.com/v1, which the API server does not serve",
		`with resource "widgetz", but the API server serves it as "widgets"`,
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v, want it to contain %q", err, want)
		}
	}
}

func TestWebhookBoundFlags(t *testing.T) {
	t.Parallel()
	o := NewOptions()
	fs := flag.NewFlagSet("host", flag.ContinueOnError)
	o.BindFlags(fs)
	w := o.Webhook
	if w.ConversionMaxRequestBytes != 16<<20 || w.MaxBytesInFlight != 48<<20 || w.ReadHeaderTimeout != 10*time.Second || w.ReadTimeout != 30*time.Second {
		t.Errorf("defaults = %+v", w)
	}
	if err := w.validateBounds(); err != nil {
		t.Errorf("the defaults are refused: %v", err)
	}
	err := fs.Parse([]string{
		"--conversion-max-request-bytes", "1048576", "--webhook-max-bytes-in-flight", "8388608",
		"--webhook-read-header-timeout", "2s", "--webhook-read-timeout", "5s",
	})
	if err != nil {
		t.Fatal(err)
	}
	w = o.Webhook
	if w.ConversionMaxRequestBytes != 1<<20 || w.MaxBytesInFlight != 8<<20 || w.ReadHeaderTimeout != 2*time.Second || w.ReadTimeout != 5*time.Second {
		t.Errorf("parsed = %+v", w)
	}
}

func TestWebhookBudgetMustHoldTheLargestRequest(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		conversion, budget int64
		wantErr            string
	}{
		"if the budget holds the largest conversion, then it is accepted": {conversion: 32 << 20, budget: 32 << 20},
		"if the budget is below the largest conversion, then it is refused naming both flags": {
			conversion: 32 << 20, budget: 16 << 20,
			wantErr: "--webhook-max-bytes-in-flight (16777216) is below --conversion-max-request-bytes (33554432): the webhook server could never hold such a request; raise --webhook-max-bytes-in-flight",
		},
		"if the budget is below the largest AdmissionReview, then it is refused": {
			conversion: 1 << 20, budget: 4 << 20,
			wantErr: "--webhook-max-bytes-in-flight (4194304) is below 7 MiB, the largest AdmissionReview (7340032)",
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			err := WebhookOptions{ConversionMaxRequestBytes: tc.conversion, MaxBytesInFlight: tc.budget}.validateBounds()
			if (err == nil) != (tc.wantErr == "") || (err != nil && !strings.Contains(err.Error(), tc.wantErr)) {
				t.Errorf("validateBounds() = %v, want %q", err, tc.wantErr)
			}
		})
	}
}
