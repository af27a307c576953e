package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protojson"
	"sigs.k8s.io/yaml"

	polyopv1alpha1 "github.com/polyop/polyop/sdk/go/gen/polyop/v1alpha1"
)

// TestHostWebhooksPrintsManifestsTheAPIServerAccepts prints the example's
// webhook manifests from a saved description, as a build would, and has the
// API server validate them with a server-side dry run.
func TestHostWebhooksPrintsManifestsTheAPIServerAccepts(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	sc := f.start("sidecar", exampleSidecarBin, "--address", f.address())
	description, err := exec.Command(hostBin, "describe", "--sidecar-address", f.address()).Output()
	if err != nil {
		t.Fatalf("host describe: %v", err)
	}
	sc.Stop()
	var described polyopv1alpha1.DescribeResponse
	if err := protojson.Unmarshal(description, &described); err != nil {
		t.Fatalf("host describe printed no description: %v\n%s", err, description)
	}
	if described.GetProtocolVersion() != polyopv1alpha1.ProtocolVersion_PROTOCOL_VERSION_V1ALPHA1 || described.GetSdkName() != "polyop-go" || described.GetSdkVersion() == "" {
		t.Errorf("host describe printed protocol version %s, SDK %q %q; want PROTOCOL_VERSION_V1ALPHA1 and polyop-go with its version",
			described.GetProtocolVersion(), described.GetSdkName(), described.GetSdkVersion())
	}
	file := filepath.Join(t.TempDir(), "description.json")
	if err := os.WriteFile(file, description, 0o600); err != nil {
		t.Fatal(err)
	}

	out, err := exec.Command(hostBin, "webhooks", "--description", file,
		"--name", f.webhookConfigurationName(),
		"--service-namespace", f.ns,
		"--failure-policy", "Ignore",
		"--namespace-selector", "kubernetes.io/metadata.name notin (kube-system)",
		"--inject-ca-from", f.ns+"/serving-cert",
	).Output()
	if err != nil {
		t.Fatalf("host webhooks: %v", err)
	}
	objs, err := decodeYAML(out)
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, obj := range objs {
		kinds = append(kinds, obj.GetKind())
		if obj.GetAnnotations()["cert-manager.io/inject-ca-from"] != f.ns+"/serving-cert" {
			t.Errorf("%s %s has no inject-ca-from annotation", obj.GetKind(), obj.GetName())
		}
		data, _ := yaml.Marshal(obj.Object)
		if obj.GetKind() == "CustomResourceDefinition" {
			patch := filepath.Join(t.TempDir(), "crd.yaml")
			if err := os.WriteFile(patch, data, 0o600); err != nil {
				t.Fatal(err)
			}
			if out, err := kubectl(t, "patch", "crd", obj.GetName(), "--type", "merge", "--patch-file", patch, "--dry-run=server"); err != nil {
				t.Errorf("the API server refuses the CRD patch: %v\n%s", err, out)
			}
			continue
		}
		if out, err := kubectlIn(t, string(data), "apply", "--dry-run=server", "-f", "-"); err != nil {
			t.Errorf("the API server refuses the %s: %v\n%s", obj.GetKind(), err, out)
		}
	}
	// The whole output applies as it is, the CRD's part merged into the CRD.
	if out, err := kubectlIn(t, string(out), "apply", "--dry-run=server", "-f", "-"); err != nil {
		t.Errorf("kubectl apply of the whole output: %v\n%s", err, out)
	}
	if got := strings.Join(kinds, ","); got != "MutatingWebhookConfiguration,ValidatingWebhookConfiguration,CustomResourceDefinition" {
		t.Errorf("host webhooks printed %s", got)
	}
	for _, want := range []string{
		"path: /mutate-examples-polyop-dev-v1-maintenancewindow",
		"path: /validate-examples-polyop-dev-v1-maintenancewindow",
		"path: /convert",
		"name: maintenancewindow-webhook",
		"failurePolicy: Ignore",
		"- DELETE",
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("host webhooks printed no %q:\n%s", want, out)
		}
	}
}

// TestHostWebhooksRefusesASidecarWithoutWebhooks checks the message for a
// sidecar that declares nothing to print.
func TestHostWebhooksRefusesASidecarWithoutWebhooks(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.startTestSidecar()
	out, err := exec.Command(hostBin, "webhooks", "--sidecar-address", f.address()).CombinedOutput()
	if err == nil {
		t.Fatalf("host webhooks succeeded:\n%s", out)
	}
	if !strings.Contains(string(out), "the sidecar declares no webhooks and no conversions") {
		t.Errorf("host webhooks printed:\n%s", out)
	}
}
