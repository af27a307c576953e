package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"

	"github.com/polyop/polyop/internal/testenv"
)

// hostWebhooks runs `host webhooks` against the fixture's sidecar, for
// configurations named after the fixture's namespace and limited to it (tests
// run in parallel: each must admit its own namespace only), and returns the
// printed objects.
func (f *fixture) hostWebhooks(args ...string) []*unstructured.Unstructured {
	f.t.Helper()
	args = append([]string{"webhooks",
		"--sidecar-address", f.address(),
		"--name", f.webhookConfigurationName(),
		"--namespace-selector", "kubernetes.io/metadata.name=" + f.ns,
	}, args...)
	out, err := exec.Command(hostBin, args...).Output()
	if err != nil {
		var exitErr *exec.ExitError
		if errors.As(err, &exitErr) {
			f.t.Fatalf("host webhooks: %v\n%s", err, exitErr.Stderr)
		}
		f.t.Fatalf("host webhooks: %v", err)
	}
	objs, err := decodeYAML(out)
	if err != nil {
		f.t.Fatalf("host webhooks printed something that is not YAML: %v\n%s", err, out)
	}
	return objs
}

func (f *fixture) webhookConfigurationName() string { return "e2e-" + f.ns }

// installWebhooks installs the sidecar's webhook configurations, as `host
// webhooks` prints them, with envtest's WebhookInstallOptions: it makes a CA
// and a serving certificate for 127.0.0.1 and points the configurations at a
// free local port. It returns the host flags that serve them there, and
// removes the configurations when the test ends.
func (f *fixture) installWebhooks(args ...string) []string {
	f.t.Helper()
	opts := &envtest.WebhookInstallOptions{LocalServingHost: "127.0.0.1"}
	for _, obj := range f.hostWebhooks(args...) {
		data, err := json.Marshal(obj.Object)
		if err != nil {
			f.t.Fatal(err)
		}
		switch obj.GetKind() {
		case "MutatingWebhookConfiguration":
			c := &admissionregistrationv1.MutatingWebhookConfiguration{}
			if err := yaml.Unmarshal(data, c); err != nil {
				f.t.Fatal(err)
			}
			opts.MutatingWebhooks = append(opts.MutatingWebhooks, c)
		case "ValidatingWebhookConfiguration":
			c := &admissionregistrationv1.ValidatingWebhookConfiguration{}
			if err := yaml.Unmarshal(data, c); err != nil {
				f.t.Fatal(err)
			}
			opts.ValidatingWebhooks = append(opts.ValidatingWebhooks, c)
		}
	}
	if err := opts.Install(env.Config); err != nil {
		f.t.Fatalf("installing the webhook configurations: %v", err)
	}
	f.t.Cleanup(func() {
		for _, c := range opts.MutatingWebhooks {
			_ = k8s.Delete(context.Background(), c)
		}
		for _, c := range opts.ValidatingWebhooks {
			_ = k8s.Delete(context.Background(), c)
		}
		_ = opts.Cleanup()
	})
	return []string{
		"--webhook-host", "127.0.0.1",
		"--webhook-port", strconv.Itoa(opts.LocalServingPort),
		"--webhook-cert-dir", opts.LocalServingCertDir,
	}
}

// startHostWithWebhooks starts the host with the webhook flags and waits
// until its webhook server serves.
func (f *fixture) startHostWithWebhooks(webhookArgs []string, args ...string) *testenv.Process {
	f.t.Helper()
	host := f.startHost(append(webhookArgs, args...)...)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := host.WaitForOutput(ctx, "Serving webhook server"); err != nil {
		f.t.Fatal(err)
	}
	return host
}

// kubectlIn runs kubectl with stdin.
func kubectlIn(t *testing.T, stdin string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(env.Kubectl, append([]string{"--kubeconfig", env.Kubeconfig}, args...)...)
	cmd.Stdin = strings.NewReader(stdin)
	out, err := cmd.CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

// windowYAML is a MaintenanceWindow manifest in the fixture's namespace; the
// spec fields left empty are left out.
func (f *fixture) windowYAML(name, start, duration, every string, annotations map[string]string) string {
	obj := f.window(name, annotations)
	spec := map[string]any{"start": start}
	if duration != "" {
		spec["duration"] = duration
	}
	if every != "" {
		spec["every"] = every
	}
	obj.Object["spec"] = spec
	data, err := yaml.Marshal(obj.Object)
	if err != nil {
		f.t.Fatal(err)
	}
	return string(data)
}

// admissionCall is one line of test/testsidecar's admission log.
type admissionCall struct {
	Webhook   string `json:"webhook"`
	Operation string `json:"operation"`
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	DryRun    bool   `json:"dryRun"`
}

func (f *fixture) admissionLog() string {
	return filepath.Join(filepath.Dir(f.socket), "admission.jsonl")
}

// admissionCalls returns the admission calls test/testsidecar logged for name.
func (f *fixture) admissionCalls(name string) []admissionCall {
	f.t.Helper()
	file, err := os.Open(f.admissionLog())
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		f.t.Fatal(err)
	}
	defer file.Close()
	var out []admissionCall
	sc := bufio.NewScanner(file)
	for sc.Scan() {
		var c admissionCall
		if json.Unmarshal(sc.Bytes(), &c) == nil && c.Name == name && c.Namespace == f.ns {
			out = append(out, c)
		}
	}
	return out
}

// decodeYAML decodes a YAML stream of objects.
func decodeYAML(data []byte) ([]*unstructured.Unstructured, error) {
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var objs []*unstructured.Unstructured
	for {
		obj := &unstructured.Unstructured{}
		err := dec.Decode(&obj.Object)
		if errors.Is(err, io.EOF) {
			return objs, nil
		}
		if err != nil {
			return nil, err
		}
		if len(obj.Object) > 0 {
			objs = append(objs, obj)
		}
	}
}

// exists reports whether the window name exists in the fixture's namespace.
func (f *fixture) exists(name string) bool {
	f.t.Helper()
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(windowGVK)
	err := k8s.Get(context.Background(), client.ObjectKey{Namespace: f.ns, Name: name}, u)
	return err == nil
}
