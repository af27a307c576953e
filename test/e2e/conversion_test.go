package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/polyop/polyop/internal/testenv"
)

const windowCRD = "maintenancewindows.examples.polyop.dev"

var crdGVK = schema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"}

// TestConversionAndSelfSignedCertificates runs the example with the host
// making its own certificate (--webhook-self-signed): the webhook
// configurations and the CRD's conversion stanza, printed by `host webhooks`
// without a caBundle, get the host's CA, and then an object written at one
// version reads back at the other, through the sidecar's conversion, and is
// defaulted and validated on the way.
//
// It does not run in parallel with other tests: it changes the conversion
// stanza of the MaintenanceWindow CRD they all use, and the API server
// restarts the CRD's watches when it does.
func TestConversionAndSelfSignedCertificates(t *testing.T) {
	f := newFixture(t)
	f.start("sidecar", exampleSidecarBin, "--address", f.address())
	port := strings.TrimPrefix(freePort(t), "127.0.0.1:")

	// The configurations and the CRD patch, pointing at the host's port on
	// 127.0.0.1, without a caBundle.
	objs := f.hostWebhooks("--url", "https://127.0.0.1:"+port)
	var patch []byte
	for _, obj := range objs {
		switch obj.GetKind() {
		case "CustomResourceDefinition":
			if obj.GetName() != windowCRD {
				t.Fatalf("host webhooks printed a conversion for %s, want %s", obj.GetName(), windowCRD)
			}
			patch, _ = json.Marshal(obj.Object)
		default:
			data, _ := yaml.Marshal(obj.Object)
			if out, err := kubectlIn(t, string(data), "apply", "-f", "-"); err != nil {
				t.Fatalf("kubectl apply %s: %v\n%s", obj.GetKind(), err, out)
			}
			obj := obj
			t.Cleanup(func() { _ = k8s.Delete(context.Background(), obj) })
		}
	}
	if patch == nil {
		t.Fatal("host webhooks printed no CRD conversion stanza")
	}
	patchFile := f.socket + ".crd-patch.json"
	if err := os.WriteFile(patchFile, patch, 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := kubectl(t, "patch", "crd", windowCRD, "--type", "merge", "--patch-file", patchFile); err != nil {
		t.Fatalf("kubectl patch crd: %v\n%s", err, out)
	}

	certDir := t.TempDir()
	f.startHostWithWebhooks([]string{
		"--webhook-self-signed",
		"--webhook-host", "127.0.0.1",
		"--webhook-port", port,
		"--webhook-cert-dir", certDir,
		"--webhook-cert-hosts", "127.0.0.1",
		"--webhook-service-namespace", f.ns,
		"--webhook-configuration-name", f.webhookConfigurationName(),
	})
	// Registered after the processes start, so it runs before they stop: the
	// CRD must not point at a host that is gone.
	t.Cleanup(func() {
		if out, err := kubectl(t, "patch", "crd", windowCRD, "--type", "merge",
			"-p", `{"spec":{"conversion":{"strategy":"None","webhook":null}}}`); err != nil {
			t.Errorf("restoring the CRD's conversion: %v\n%s", err, out)
		}
	})

	secret := &corev1.Secret{}
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: f.ns, Name: "maintenancewindow-webhook-cert"}, secret); err != nil {
		t.Fatalf("the host kept no certificate in a Secret: %v", err)
	}
	ca := secret.Data["ca.crt"]
	if len(ca) == 0 || secret.Type != corev1.SecretTypeTLS {
		t.Fatalf("the Secret is of type %s with keys %v", secret.Type, keys(secret.Data))
	}
	if onDisk, err := os.ReadFile(certDir + "/tls.crt"); err != nil || !bytes.Equal(onDisk, secret.Data["tls.crt"]) {
		t.Fatalf("the cert dir does not hold the Secret's certificate (%v)", err)
	}
	testenv.Eventually(f.t, time.Minute, "the host sets every caBundle to its CA", func() (bool, string) {
		var missing []string
		mutating := &admissionregistrationv1.MutatingWebhookConfiguration{}
		if err := k8s.Get(context.Background(), client.ObjectKey{Name: f.webhookConfigurationName()}, mutating); err != nil || !bytes.Equal(mutating.Webhooks[0].ClientConfig.CABundle, ca) {
			missing = append(missing, "MutatingWebhookConfiguration")
		}
		validating := &admissionregistrationv1.ValidatingWebhookConfiguration{}
		if err := k8s.Get(context.Background(), client.ObjectKey{Name: f.webhookConfigurationName()}, validating); err != nil || !bytes.Equal(validating.Webhooks[0].ClientConfig.CABundle, ca) {
			missing = append(missing, "ValidatingWebhookConfiguration")
		}
		crd := &unstructured.Unstructured{}
		crd.SetGroupVersionKind(crdGVK)
		bundle := ""
		if err := k8s.Get(context.Background(), client.ObjectKey{Name: windowCRD}, crd); err == nil {
			bundle, _, _ = unstructured.NestedString(crd.Object, "spec", "conversion", "webhook", "clientConfig", "caBundle")
		}
		if want, _ := json.Marshal(ca); bundle != strings.Trim(string(want), `"`) {
			missing = append(missing, "CustomResourceDefinition")
		}
		return len(missing) == 0, "no caBundle yet in " + strings.Join(missing, ", ")
	})

	t.Run("an object written at v1beta1 reads back at v1, defaulted", func(t *testing.T) {
		manifest := `apiVersion: examples.polyop.dev/v1beta1
kind: MaintenanceWindow
metadata:
  name: from-beta
  namespace: ` + f.ns + `
spec:
  schedule:
    start: "2026-01-01T00:00:00Z"
    every: 24h
  suspend: true
`
		var out string
		testenv.Eventually(f.t, time.Minute, "the API server reaches the conversion webhook", func() (bool, string) {
			var err error
			out, err = kubectlIn(t, manifest, "create", "-f", "-")
			return err == nil, out
		})
		// Defaulted and validated at v1, through the conversion both ways.
		if !strings.Contains(out, "Warning: spec.paused is set") {
			t.Errorf("kubectl create printed:\n%s\nwant v1's warning about spec.paused", out)
		}
		out, err := kubectl(t, "get", "maintenancewindows.v1.examples.polyop.dev", "from-beta", "-n", f.ns,
			"-o", "jsonpath={.apiVersion} {.spec.start} {.spec.every} {.spec.duration} {.spec.paused}")
		if err != nil {
			t.Fatalf("kubectl get at v1: %v\n%s", err, out)
		}
		if want := "examples.polyop.dev/v1 2026-01-01T00:00:00Z 24h 1h true"; out != want {
			t.Errorf("at v1 the window reads %q, want %q", out, want)
		}
	})

	t.Run("an object written at v1 reads back at v1beta1, with its status", func(t *testing.T) {
		// A daily window of 2h whose first opening is 6 to 7 hours away: it is
		// Pending whatever the time of day the test runs.
		start := time.Now().UTC().Truncate(time.Hour).Add(7 * time.Hour).Format(time.RFC3339)
		if out, err := kubectlIn(t, f.windowYAML("from-v1", start, "2h", "24h", nil), "create", "-f", "-"); err != nil {
			t.Fatalf("kubectl create at v1: %v\n%s", err, out)
		}
		f.waitPhase("from-v1", "Pending", time.Minute)
		out, err := kubectl(t, "get", "maintenancewindows.v1beta1.examples.polyop.dev", "from-v1", "-n", f.ns,
			"-o", "jsonpath={.apiVersion} {.spec.schedule.start} {.spec.schedule.every} {.spec.duration} {.status.phase}")
		if err != nil {
			t.Fatalf("kubectl get at v1beta1: %v\n%s", err, out)
		}
		if want := "examples.polyop.dev/v1beta1 " + start + " 24h 2h Pending"; out != want {
			t.Errorf("at v1beta1 the window reads %q, want %q", out, want)
		}
		// A list converts every object in one call.
		out, err = kubectl(t, "get", "maintenancewindows.v1beta1.examples.polyop.dev", "-n", f.ns, "-o", "name")
		if err != nil || strings.Count(out, "\n") != 1 {
			t.Errorf("kubectl get list at v1beta1: %v\n%s", err, out)
		}
	})
}

func keys(m map[string][]byte) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
