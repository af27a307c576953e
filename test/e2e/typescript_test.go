package e2e

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/polyop/polyop/internal/testenv"
)

var configMapSyncGVK = schema.GroupVersionKind{Group: "examples.polyop.dev", Version: "v1", Kind: "ConfigMapSync"}

// configMapSyncDir is the TypeScript ConfigMapSync example.
func configMapSyncDir() string {
	return filepath.Join(testenv.RepoRoot(), "examples", "typescript", "configmapsync")
}

// node compiles the TypeScript SDK and the ConfigMapSync example (tsc -b) and
// returns node's path, or fails the test when node or node_modules is
// missing (make node_modules installs them).
func node(t *testing.T) string {
	t.Helper()
	err := testenv.BuildTypeScript(filepath.Join("examples", "typescript", "configmapsync"))
	if errors.Is(err, testenv.ErrNoNode) {
		t.Fatalf("cannot run the TypeScript example (run make node_modules, or make test): %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	bin, err := exec.LookPath("node")
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

// configMapSyncCRD is the ConfigMapSync example's CRD.
var configMapSyncCRD = &exampleCRD{dir: filepath.Join(configMapSyncDir(), "config", "crd"), name: "configmapsyncs.examples.polyop.dev"}

// startConfigMapSync starts the TypeScript example's sidecar on the fixture's
// socket. It is told the Cluster service's address on its command line, as a
// pod's sidecar is through POLYOP_CLUSTER_ADDRESS: a restarted sidecar is not
// greeted by the host again.
func (f *fixture) startConfigMapSync(nodeBin string) *testenv.Process {
	f.t.Helper()
	p := f.start("sidecar", nodeBin, filepath.Join(configMapSyncDir(), "dist", "main.js"),
		"--address", f.address(), "--cluster-address", f.clusterAddress(), "--log-level", "debug")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := p.WaitForOutput(ctx, `"msg":"Serving"`); err != nil {
		f.t.Fatal(err)
	}
	return p
}

// labelledNamespace creates a namespace with labels for the test and returns its name.
func (f *fixture) labelledNamespace(suffix string, labels map[string]string) string {
	f.t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: f.ns + "-" + suffix, Labels: labels}}
	if err := k8s.Create(context.Background(), ns); err != nil {
		f.t.Fatal(err)
	}
	return ns.Name
}

// configMapData returns the ConfigMap's data, or nil when it does not exist.
func (f *fixture) configMapData(namespace, name string) map[string]string {
	f.t.Helper()
	cm := &corev1.ConfigMap{}
	err := k8s.Get(context.Background(), client.ObjectKey{Namespace: namespace, Name: name}, cm)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		f.t.Fatal(err)
	}
	if cm.Data == nil {
		return map[string]string{}
	}
	return cm.Data
}

func (f *fixture) configMapSync(name string) (*unstructured.Unstructured, error) {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(configMapSyncGVK)
	return u, k8s.Get(context.Background(), client.ObjectKey{Namespace: f.ns, Name: name}, u)
}

// TestTypeScriptConfigMapSyncExample runs the TypeScript SDK's ConfigMapSync
// example, unchanged, with the real host against the API server, and drives
// it with kubectl as a user would. The example works imperatively, through
// the host's Cluster service: it reads the source, creates, updates and
// deletes copies in other namespaces, and lists them by label.
func TestTypeScriptConfigMapSyncExample(t *testing.T) {
	t.Parallel()
	nodeBin := node(t)
	configMapSyncCRD.install(t)
	f := newFixture(t)
	teamA := f.labelledNamespace("a", nil)
	teamB := f.labelledNamespace("b", nil)
	selected := f.labelledNamespace("c", map[string]string{"ca-bundle": f.ns})
	sidecar := f.startConfigMapSync(nodeBin)
	// The host watches the namespaces the example copies into as well: its
	// Cluster service writes only in the namespaces the host watches.
	f.startHostWithWebhooks(f.installWebhooks(), "--cluster-address", f.clusterAddress(),
		"--namespace", strings.Join([]string{teamA, teamB, selected}, ","))

	// The sample, aimed at this test's namespaces.
	sample := fmt.Sprintf(`apiVersion: v1
kind: ConfigMap
metadata:
  name: ca-bundle
data:
  ca.crt: CERT-1
---
apiVersion: examples.polyop.dev/v1
kind: ConfigMapSync
metadata:
  name: ca-bundle
spec:
  source: ca-bundle
  targetNamespaces: [%s, %s, %s]
  namespaceSelector: ca-bundle=%s
`, teamB, teamA, teamB, f.ns)

	t.Run("the sample is defaulted, copied into every target and Ready", func(t *testing.T) {
		out, err := kubectlIn(t, sample, "apply", "-n", f.ns, "-f", "-")
		if err != nil {
			t.Fatalf("kubectl apply: %v\n%s", err, out)
		}
		if !strings.Contains(out, "listed a namespace twice") {
			t.Errorf("kubectl apply printed:\n%s\nwant the defaulter's warning", out)
		}
		sync, err := f.configMapSync("ca-bundle")
		if err != nil {
			t.Fatal(err)
		}
		targetName, _, _ := unstructured.NestedString(sync.Object, "spec", "targetName")
		targets, _, _ := unstructured.NestedStringSlice(sync.Object, "spec", "targetNamespaces")
		if targetName != "ca-bundle" || strings.Join(targets, ",") != teamA+","+teamB || sync.GetLabels()["configmapsync.examples.polyop.dev/source"] != "ca-bundle" {
			t.Errorf("not defaulted: targetName %q, targetNamespaces %v, labels %v", targetName, targets, sync.GetLabels())
		}
		testenv.Eventually(f.t, 2*time.Minute, "the sync is Ready", func() (bool, string) {
			out, err := kubectl(t, "get", "configmapsyncs", "ca-bundle", "-n", f.ns, "-o", `jsonpath={.status.conditions[?(@.type=="Ready")].status} {.status.syncedNamespaces}`)
			return err == nil && strings.HasPrefix(out, "True "), out
		})
		for _, ns := range []string{teamA, teamB, selected} {
			if got := f.configMapData(ns, "ca-bundle"); got["ca.crt"] != "CERT-1" {
				t.Errorf("the copy in %s holds %v", ns, got)
			}
		}
		out, _ = kubectl(t, "get", "configmapsyncs", "-n", f.ns)
		if !contains(out, "SOURCE", "SYNCED", "TARGETS", "READY", "ca-bundle", "3", "True") {
			t.Errorf("kubectl get configmapsyncs printed:\n%s\nwant the printer columns", out)
		}
		out, _ = kubectl(t, "get", "configmapsyncs", "-n", f.ns, "-l", "configmapsync.examples.polyop.dev/source=ca-bundle", "-o", "name")
		if out != "configmapsync.examples.polyop.dev/ca-bundle" {
			t.Errorf("selecting by the defaulted label found %q", out)
		}
		out, _ = kubectl(t, "get", "events", "-n", f.ns, "--field-selector", "involvedObject.name=ca-bundle,reason=Synced")
		if !strings.Contains(out, "to 3 of 3 namespaces") {
			t.Errorf("no Synced event on the sync; kubectl get events printed:\n%s", out)
		}
	})

	t.Run("a change to the source reaches the copies", func(t *testing.T) {
		if out, err := kubectl(t, "patch", "configmap", "ca-bundle", "-n", f.ns, "--type", "merge", "-p", `{"data":{"ca.crt":"CERT-2"}}`); err != nil {
			t.Fatalf("kubectl patch: %v\n%s", err, out)
		}
		testenv.Eventually(f.t, 2*time.Minute, "every copy holds CERT-2", func() (bool, string) {
			a, b, c := f.configMapData(teamA, "ca-bundle"), f.configMapData(teamB, "ca-bundle"), f.configMapData(selected, "ca-bundle")
			return a["ca.crt"] == "CERT-2" && b["ca.crt"] == "CERT-2" && c["ca.crt"] == "CERT-2", fmt.Sprintf("%v %v %v", a, b, c)
		})
	})

	t.Run("a sync that could not work is refused with field errors", func(t *testing.T) {
		manifest := fmt.Sprintf(`apiVersion: examples.polyop.dev/v1
kind: ConfigMapSync
metadata:
  name: broken
  namespace: %s
spec:
  source: ca-bundle
  targetNamespaces: [%s, Not_A_Namespace]
`, f.ns, f.ns)
		out, err := kubectlIn(t, manifest, "apply", "-f", "-")
		if err == nil {
			t.Fatalf("kubectl apply accepted an invalid sync:\n%s", out)
		}
		// The defaulter sorted the targets before the validator saw them.
		for _, want := range []string{
			`The ConfigMapSync "broken" is invalid`,
			`spec.targetNamespaces[0]: Invalid value: "Not_A_Namespace": must be a namespace name`,
			`spec.targetNamespaces[1]: Invalid value: "` + f.ns + `": the source's own namespace`,
		} {
			if !strings.Contains(out, want) {
				t.Errorf("kubectl apply printed:\n%s\nwant it to contain %q", out, want)
			}
		}
	})

	t.Run("a target taken out loses its copy", func(t *testing.T) {
		patch := fmt.Sprintf(`{"spec":{"targetNamespaces":[%q],"namespaceSelector":null}}`, teamA)
		if out, err := kubectl(t, "patch", "configmapsync", "ca-bundle", "-n", f.ns, "--type", "merge", "-p", patch); err != nil {
			t.Fatalf("kubectl patch: %v\n%s", err, out)
		}
		testenv.Eventually(f.t, 2*time.Minute, "only the copy in the first target is left", func() (bool, string) {
			a, b, c := f.configMapData(teamA, "ca-bundle"), f.configMapData(teamB, "ca-bundle"), f.configMapData(selected, "ca-bundle")
			return a != nil && b == nil && c == nil, fmt.Sprintf("a %v, b %v, c %v", a, b, c)
		})
	})

	t.Run("changes made while the sidecar is down converge once it is back", func(t *testing.T) {
		sidecar.Stop()
		if err := k8s.Delete(context.Background(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: teamA, Name: "ca-bundle"}}); err != nil {
			t.Fatalf("deleting the copy: %v", err)
		}
		if out, err := kubectl(t, "patch", "configmap", "ca-bundle", "-n", f.ns, "--type", "merge", "-p", `{"data":{"ca.crt":"CERT-3"}}`); err != nil {
			t.Fatalf("kubectl patch: %v\n%s", err, out)
		}
		sidecar = f.startConfigMapSync(nodeBin)
		testenv.Eventually(f.t, 2*time.Minute, "the copy is back with CERT-3", func() (bool, string) {
			a := f.configMapData(teamA, "ca-bundle")
			return a["ca.crt"] == "CERT-3", fmt.Sprintf("%v", a)
		})
	})

	t.Run("deleting the sync deletes its copies", func(t *testing.T) {
		if out, err := kubectl(t, "delete", "configmapsync", "ca-bundle", "-n", f.ns, "--wait=false"); err != nil {
			t.Fatalf("kubectl delete: %v\n%s", err, out)
		}
		testenv.Eventually(f.t, 2*time.Minute, "the sync and its copies are gone", func() (bool, string) {
			_, err := f.configMapSync("ca-bundle")
			a := f.configMapData(teamA, "ca-bundle")
			return apierrors.IsNotFound(err) && a == nil, fmt.Sprintf("sync: %v, copy %v", err, a)
		})
		if f.configMapData(f.ns, "ca-bundle") == nil {
			t.Error("the source was deleted too")
		}
	})
}
