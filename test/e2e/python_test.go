package e2e

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/polyop/polyop/internal/testenv"
)

var tenantGVK = schema.GroupVersionKind{Group: "examples.polyop.dev", Version: "v1", Kind: "Tenant"}

// tenantDir is the Python Tenant example.
func tenantDir() string { return filepath.Join(testenv.RepoRoot(), "examples", "python", "tenant") }

// python returns the virtualenv's interpreter, with the polyop SDK and the
// Tenant example installed (make .venv), or fails the test saying so.
func python(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(testenv.RepoRoot(), ".venv", "bin", "python")
	if out, err := exec.Command(bin, "-c", "import polyop, tenant").CombinedOutput(); err != nil {
		t.Fatalf("no Python virtualenv with the polyop SDK (run make .venv, or make test): %v\n%s", err, out)
	}
	return bin
}

// tenantCRD is the Tenant example's CRD.
var tenantCRD = &exampleCRD{dir: filepath.Join(tenantDir(), "config", "crd"), name: "tenants.examples.polyop.dev"}

// startPythonTenant starts the Tenant example's sidecar on the fixture's
// socket. It is told the Cluster service's address in
// POLYOP_CLUSTER_ADDRESS, as a pod's sidecar is: its reconciler lists
// through the Cluster service, and a restarted sidecar is not greeted by the
// host again.
func (f *fixture) startPythonTenant(py string) *testenv.Process {
	f.t.Helper()
	p, err := testenv.StartProcessWith("sidecar", py, []string{"-m", "tenant", "--address", f.address()},
		testenv.ProcessOptions{Logger: f.t, Env: []string{"POLYOP_CLUSTER_ADDRESS=" + f.clusterAddress()}})
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(p.Stop)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := p.WaitForOutput(ctx, "Serving on "); err != nil {
		f.t.Fatal(err)
	}
	return p
}

func (f *fixture) tenant(name string) *unstructured.Unstructured {
	f.t.Helper()
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(tenantGVK)
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: f.ns, Name: name}, u); err != nil {
		f.t.Fatalf("getting tenant %s: %v", name, err)
	}
	return u
}

// tenantChildren returns the tenant's children of each kind, nil where absent.
func (f *fixture) tenantChildren(name string) (*corev1.ResourceQuota, *corev1.LimitRange, *corev1.ConfigMap) {
	f.t.Helper()
	key := client.ObjectKey{Namespace: f.ns, Name: "tenant-" + name}
	quota, limits, settings := &corev1.ResourceQuota{}, &corev1.LimitRange{}, &corev1.ConfigMap{}
	out := []client.Object{quota, limits, settings}
	for i, obj := range out {
		err := k8s.Get(context.Background(), key, obj)
		if apierrors.IsNotFound(err) {
			out[i] = nil
			continue
		}
		if err != nil {
			f.t.Fatalf("getting %s: %v", key, err)
		}
	}
	quota, _ = out[0].(*corev1.ResourceQuota)
	limits, _ = out[1].(*corev1.LimitRange)
	settings, _ = out[2].(*corev1.ConfigMap)
	return quota, limits, settings
}

// tenantControls reports whether obj's controller owner reference points at owner.
func tenantControls(obj metav1.Object, owner *unstructured.Unstructured) bool {
	ref := metav1.GetControllerOf(obj)
	return ref != nil && ref.UID == owner.GetUID() && ref.Kind == "Tenant" && ref.Name == owner.GetName()
}

// TestPythonTenantExample runs the Python SDK's Tenant example, unchanged,
// with the real host against the API server, and drives it with kubectl as a
// user would: the sample's children are applied and owned, an update reaches
// them and prunes what is no longer declared, the validating webhook refuses
// invalid tenants with field errors, and a sidecar restart converges.
func TestPythonTenantExample(t *testing.T) {
	t.Parallel()
	py := python(t)
	tenantCRD.install(t)
	f := newFixture(t)
	sidecar := f.startPythonTenant(py)
	f.startHostWithWebhooks(f.installWebhooks())
	sample := filepath.Join(tenantDir(), "config", "samples", "tenant.yaml")

	t.Run("the sample becomes Ready with its children applied and owned", func(t *testing.T) {
		if out, err := kubectl(t, "apply", "-n", f.ns, "-f", sample); err != nil {
			t.Fatalf("kubectl apply: %v\n%s", err, out)
		}
		testenv.Eventually(f.t, 2*time.Minute, "the tenant is Ready", func() (bool, string) {
			out, err := kubectl(t, "get", "tenants", "payments", "-n", f.ns, "-o", `jsonpath={.status.conditions[?(@.type=="Ready")].status}`)
			return err == nil && out == "True", out
		})
		tenant := f.tenant("payments")
		var quota *corev1.ResourceQuota
		var limits *corev1.LimitRange
		var settings *corev1.ConfigMap
		testenv.Eventually(f.t, time.Minute, "the three children exist", func() (bool, string) {
			quota, limits, settings = f.tenantChildren("payments")
			return quota != nil && limits != nil && settings != nil, fmt.Sprintf("quota %v, limits %v, settings %v", quota != nil, limits != nil, settings != nil)
		})
		for _, child := range []metav1.Object{quota, limits, settings} {
			if !tenantControls(child, tenant) {
				t.Errorf("%s %s is not controlled by the tenant: owner references %v", child.GetName(), child.GetNamespace(), child.GetOwnerReferences())
			}
		}
		if got := quota.Spec.Hard[corev1.ResourceRequestsCPU]; got.String() != "8" {
			t.Errorf("the quota's requests.cpu = %s, want 8", got.String())
		}
		if got := quota.Spec.Hard[corev1.ResourcePods]; got.String() != "50" {
			t.Errorf("the quota's pods = %s, want 50", got.String())
		}
		if got := limits.Spec.Limits[0].Default[corev1.ResourceMemory]; got.String() != "256Mi" {
			t.Errorf("the default memory = %s, want 256Mi", got.String())
		}
		if settings.Data["owner"] != "payments-team@example.com" || settings.Data["billing-code"] != "4711" {
			t.Errorf("the settings are %v", settings.Data)
		}
		if g, _, _ := unstructured.NestedInt64(tenant.Object, "status", "observedGeneration"); g != tenant.GetGeneration() {
			t.Errorf("status.observedGeneration = %d, want %d", g, tenant.GetGeneration())
		}
		out, _ := kubectl(t, "get", "tenants", "-n", f.ns)
		if !contains(out, "OWNER", "CPU", "MEMORY", "READY", "payments-team@example.com", "16Gi", "True") {
			t.Errorf("kubectl get tenants printed:\n%s\nwant the printer columns", out)
		}
		out, _ = kubectl(t, "get", "events", "-n", f.ns, "--field-selector", "involvedObject.name=payments,reason=Reconciled")
		if !strings.Contains(out, "applied ResourceQuota, ConfigMap, LimitRange") {
			t.Errorf("no Reconciled event on the tenant; kubectl get events printed:\n%s", out)
		}
	})

	t.Run("the quota's usage is read by the tenant index", func(t *testing.T) {
		// envtest runs no quota controller: the test reports the usage as
		// it would, and the reconciler, listing ResourceQuotas by its
		// declared index from the host's cache, copies it into the status.
		quota, _, _ := f.tenantChildren("payments")
		if quota == nil {
			t.Fatal("no quota")
		}
		quota.Status.Used = corev1.ResourceList{corev1.ResourcePods: resource.MustParse("7")}
		if err := k8s.Status().Update(context.Background(), quota); err != nil {
			t.Fatal(err)
		}
		testenv.Eventually(f.t, time.Minute, "the tenant's status.used says 7 pods", func() (bool, string) {
			used, _, _ := unstructured.NestedStringMap(f.tenant("payments").Object, "status", "used")
			return used["pods"] == "7", fmt.Sprint(used)
		})
	})

	t.Run("an update reaches the children and prunes the ones no longer declared", func(t *testing.T) {
		patch := `{"spec":{"quota":{"cpu":"16"},"containerDefaults":null}}`
		if out, err := kubectl(t, "patch", "tenant", "payments", "-n", f.ns, "--type", "merge", "-p", patch); err != nil {
			t.Fatalf("kubectl patch: %v\n%s", err, out)
		}
		testenv.Eventually(f.t, 2*time.Minute, "the quota says 16 CPUs and the limit range is gone", func() (bool, string) {
			quota, limits, _ := f.tenantChildren("payments")
			if quota == nil {
				return false, "no quota"
			}
			cpu := quota.Spec.Hard[corev1.ResourceRequestsCPU]
			return cpu.String() == "16" && limits == nil, fmt.Sprintf("requests.cpu %s, limit range present %v", cpu.String(), limits != nil)
		})
		testenv.Eventually(f.t, time.Minute, "the status describes the new generation", func() (bool, string) {
			tenant := f.tenant("payments")
			g, _, _ := unstructured.NestedInt64(tenant.Object, "status", "observedGeneration")
			return g == tenant.GetGeneration(), fmt.Sprintf("observedGeneration %d, generation %d", g, tenant.GetGeneration())
		})
	})

	t.Run("invalid quotas are refused with one error per field", func(t *testing.T) {
		manifest := fmt.Sprintf(`apiVersion: examples.polyop.dev/v1
kind: Tenant
metadata:
  name: broken
  namespace: %s
spec:
  owner: someone@example.com
  quota:
    cpu: "-1"
    memory: lots
`, f.ns)
		out, err := kubectlIn(t, manifest, "apply", "-f", "-")
		if err == nil {
			t.Fatalf("kubectl apply accepted an invalid tenant:\n%s", out)
		}
		for _, want := range []string{
			`The Tenant "broken" is invalid`,
			`spec.quota.cpu: Invalid value: "-1": must be greater than zero`,
			`spec.quota.memory: Invalid value: "lots": 'lots' is not a quantity`,
		} {
			if !strings.Contains(out, want) {
				t.Errorf("kubectl apply printed:\n%s\nwant it to contain %q", out, want)
			}
		}
	})

	t.Run("the owner cannot change", func(t *testing.T) {
		out, err := kubectl(t, "patch", "tenant", "payments", "-n", f.ns, "--type", "merge", "-p", `{"spec":{"owner":"mallory@example.com"}}`)
		if err == nil {
			t.Fatalf("kubectl patch changed the owner:\n%s", out)
		}
		if want := `spec.owner: Forbidden: is immutable: the tenant belongs to 'payments-team@example.com'`; !strings.Contains(out, want) {
			t.Errorf("kubectl patch printed:\n%s\nwant it to contain %q", out, want)
		}
	})

	t.Run("children changed while the sidecar is down converge once it is back", func(t *testing.T) {
		sidecar.Stop()
		quota, _, settings := f.tenantChildren("payments")
		if err := k8s.Delete(context.Background(), settings); err != nil {
			t.Fatalf("deleting the settings: %v", err)
		}
		quota.Spec.Hard[corev1.ResourceRequestsCPU] = resource.MustParse("1")
		if err := k8s.Update(context.Background(), quota); err != nil {
			t.Fatalf("changing the quota: %v", err)
		}
		sidecar = f.startPythonTenant(py)
		testenv.Eventually(f.t, 2*time.Minute, "the settings are back and the quota says 16 CPUs again", func() (bool, string) {
			quota, _, settings := f.tenantChildren("payments")
			if quota == nil {
				return false, "no quota"
			}
			cpu := quota.Spec.Hard[corev1.ResourceRequestsCPU]
			return settings != nil && cpu.String() == "16", fmt.Sprintf("settings present %v, requests.cpu %s", settings != nil, cpu.String())
		})
	})
}

// TestPythonClusterClient runs test/e2e/testdata/python/clusterprobe.py, a
// Python sidecar that reads and writes through the host's Cluster service,
// and checks what its client saw: objects read from the cache and from the API
// server, writes of every kind, and the API server's errors as the SDK's
// typed exceptions (NotFound, AlreadyExists, Conflict, Invalid with its
// causes).
func TestPythonClusterClient(t *testing.T) {
	t.Parallel()
	py := python(t)
	f := newFixture(t)
	script := filepath.Join(testenv.RepoRoot(), "test", "e2e", "testdata", "python", "clusterprobe.py")
	sidecar := f.start("sidecar", py, script, "--address", f.address())
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := sidecar.WaitForOutput(ctx, "Serving on "); err != nil {
		t.Fatal(err)
	}
	f.startHost()

	probe := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "probe", Labels: map[string]string{"polyop.dev/probe": "true"}}}
	f.create(probe)
	report := &corev1.ConfigMap{}
	testenv.Eventually(f.t, 2*time.Minute, "the probe's report exists", func() (bool, string) {
		err := k8s.Get(context.Background(), client.ObjectKey{Namespace: f.ns, Name: "probe-report"}, report)
		return err == nil, fmt.Sprint(err)
	})
	if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(probe), probe); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"get":            string(probe.UID),
		"get-missing":    "NotFound 404",
		"create":         "probe-secret",
		"create-again":   "AlreadyExists 409",
		"update":         "update",
		"update-stale":   "Conflict 409",
		"create-invalid": "Invalid 422 metadata.name",
		"patch":          "patch",
		"apply":          "1",
		"list":           "1",
		"list-cached":    "CACHE",
		"delete":         "None",
		"delete-again":   "NotFound 404",
		"resolve":        "deployments",
	}
	for key, w := range want {
		if got := report.Data[key]; got != w {
			t.Errorf("step %s: the client saw %q, want %q", key, got, w)
		}
	}
	out, _ := kubectl(t, "get", "events", "-n", f.ns, "--field-selector", "involvedObject.name=probe,reason=Probed")
	if !strings.Contains(out, "14 steps") {
		t.Errorf("no Probed event on the probe; kubectl get events printed:\n%s", out)
	}
}
