package e2e

import (
	"bytes"
	"crypto/tls"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/polyop/polyop/internal/testenv"
	"github.com/polyop/polyop/internal/testenv/controlplane"
)

// TestKubebuilderWebhookManifestsWork applies the webhook configurations
// controller-gen generates from kubebuilder's +kubebuilder:webhook markers
// for MaintenanceWindow (testdata/kubebuilder-webhooks.yaml: controller-
// runtime's /mutate-… and /validate-… paths, kubebuilder's names) against the
// host serving the example sidecar, as kubebuilder's envtest suite installs
// config/webhook: a create is defaulted, an invalid one is refused. The path
// the host served the mutating webhook at before, /default-…, still answers.
func TestKubebuilderWebhookManifestsWork(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.start("sidecar", exampleSidecarBin, "--address", f.address())

	// Tests run in parallel against one API server: each configuration gets
	// the fixture's name and admits the fixture's namespace only.
	opts := controlplane.InstallWebhookManifests(t, env.Config, k8s,
		filepath.Join(testenv.RepoRoot(), "test", "e2e", "testdata", "kubebuilder-webhooks.yaml"), "kubebuilder-"+f.ns, f.ns)
	f.startHostWithWebhooks([]string{
		"--webhook-host", "127.0.0.1",
		"--webhook-port", strconv.Itoa(opts.LocalServingPort),
		"--webhook-cert-dir", opts.LocalServingCertDir,
	})

	t.Run("a create is defaulted through /mutate-…", func(t *testing.T) {
		if out, err := kubectlIn(t, f.windowYAML("defaulted", "2026-01-01T00:00:00Z", "", "24h", nil), "create", "-f", "-"); err != nil {
			t.Fatalf("kubectl create: %v\n%s", err, out)
		}
		out, err := kubectl(t, "get", "maintenancewindows.v1.examples.polyop.dev", "defaulted", "-n", f.ns,
			"-o", `jsonpath={.spec.duration} {.metadata.labels.examples\.polyop\.dev/team}`)
		if err != nil {
			t.Fatalf("kubectl get: %v\n%s", err, out)
		}
		if out != "1h unassigned" {
			t.Errorf("duration and team = %q, want the defaults %q", out, "1h unassigned")
		}
	})

	t.Run("an invalid create is refused through /validate-…, by kubebuilder's webhook name", func(t *testing.T) {
		out, err := kubectlIn(t, f.windowYAML("too-long", "2026-01-01T00:00:00Z", "48h", "", nil), "create", "-f", "-")
		if err == nil {
			t.Fatalf("kubectl create accepted a 48h window:\n%s", out)
		}
		if want := `spec.duration: Invalid value: "48h": must be between 1m and 24h`; !strings.Contains(out, want) {
			t.Errorf("kubectl create printed:\n%s\nwant it to contain %q", out, want)
		}
		if f.exists("too-long") {
			t.Error("the refused window exists")
		}
	})

	t.Run("the old /default-… path still defaults", func(t *testing.T) {
		window := f.window("by-alias", nil)
		delete(window.Object["spec"].(map[string]any), "duration")
		obj, err := json.Marshal(window.Object)
		if err != nil {
			t.Fatal(err)
		}
		review, err := json.Marshal(admissionv1.AdmissionReview{
			TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
			Request: &admissionv1.AdmissionRequest{
				UID:       "by-alias",
				Kind:      metav1.GroupVersionKind{Group: windowGVK.Group, Version: windowGVK.Version, Kind: windowGVK.Kind},
				Resource:  metav1.GroupVersionResource{Group: windowGVK.Group, Version: windowGVK.Version, Resource: "maintenancewindows"},
				Namespace: f.ns,
				Name:      "by-alias",
				Operation: admissionv1.Create,
				Object:    runtime.RawExtension{Raw: obj},
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		client := &http.Client{Transport: &http.Transport{
			TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // The test's own host, with envtest's certificate.
		}}
		defer client.CloseIdleConnections()
		url := "https://" + net.JoinHostPort(opts.LocalServingHost, strconv.Itoa(opts.LocalServingPort)) +
			"/default-examples-polyop-dev-v1-maintenancewindow"
		resp, err := client.Post(url, "application/json", bytes.NewReader(review))
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		var answer admissionv1.AdmissionReview
		if err := json.Unmarshal(body, &answer); err != nil || answer.Response == nil {
			t.Fatalf("%s answered %s %s, want an AdmissionReview", url, resp.Status, body)
		}
		if !answer.Response.Allowed || !strings.Contains(string(answer.Response.Patch), `"/spec/duration"`) {
			t.Errorf("%s answered %s, want an allowed review with a patch defaulting /spec/duration", url, body)
		}
	})
}
