package host

import (
	"flag"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"

	"github.com/polyop/polyop/internal/description"
	"github.com/polyop/polyop/internal/manifests"
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
	opts := NewOptions()
	opts.Webhook.ServiceNamespace = "ops"
	res := resolved(t, &description.Description{Name: "widgets", Webhooks: []description.Webhook{{GVK: widget, Validate: true}}}, opts)
	o := opts.Webhook.withDefaults(res)
	if o.ServiceName != "widgets-webhook" || o.ServiceNamespace != "ops" || o.CertSecret != "widgets-webhook-cert" || o.ConfigurationName != "widgets" || o.CertName != "tls.crt" || o.CertDir == "" {
		t.Errorf("defaults = %+v", o)
	}
}

// TestPrintedAndRunTimeWebhookServiceAgree: the Service the host makes its
// certificate for, with no --webhook-service-* flag, is the one the webhook
// configurations `host webhooks` prints call, with no --service-* flag: both
// in the pod's namespace.
func TestPrintedAndRunTimeWebhookServiceAgree(t *testing.T) {
	t.Setenv("POD_NAMESPACE", "operators")
	desc := &description.Description{Name: "widgets", Webhooks: []description.Webhook{{GVK: widget, Validate: true}}}
	runTime := NewOptions().Webhook.withDefaults(resolved(t, desc, NewOptions()))

	printedRes, err := description.Resolve(description.GuessingMapper(desc), desc, description.ResolveOptions{})
	if err != nil {
		t.Fatal(err)
	}
	objs, err := manifests.Webhooks(printedRes, manifests.WebhookOptions{})
	if err != nil {
		t.Fatal(err)
	}
	validating, ok := objs[0].(*admissionregistrationv1.ValidatingWebhookConfiguration)
	if !ok || len(validating.Webhooks) != 1 {
		t.Fatalf("printed %v", objs)
	}
	printed := validating.Webhooks[0].ClientConfig.Service
	if printed.Namespace != runTime.ServiceNamespace || printed.Name != runTime.ServiceName || printed.Namespace != "operators" {
		t.Errorf("printed webhooks call Service %s/%s, the host's certificate is for %s/%s; want both operators/widgets-webhook",
			printed.Namespace, printed.Name, runTime.ServiceNamespace, runTime.ServiceName)
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
