package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/polyop/polyop/internal/testenv"
)

// A sidecar on the Go SDK declares two indexes on ConfigMaps, by a field path
// (the controller owner's name, as kubebuilder's tutorial indexes Jobs) and by
// CEL, and lists by both inside its reconciles: the Lists are served from the
// host's cache and follow the ConfigMaps as they come and change.
func TestASidecarListsByTheIndexesItDeclares(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.start("sidecar", testSidecarBin, "index", "--address", f.address())
	f.startHost()
	listsByIndexes(t, f)

	// The host watches the fixture's namespace only (--namespace): a List
	// across every namespace of the declared kind says so.
	var summary corev1.ConfigMap
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: f.ns, Name: "p-summary"}, &summary); err != nil {
		t.Fatal(err)
	}
	if got := summary.Data["allNamespaces"]; !strings.HasPrefix(got, "refused: ") || !contains(got, "caches ConfigMap in namespaces "+f.ns+" only", "set uncached") {
		t.Errorf("a List of ConfigMaps across every namespace gave %q, want it refused naming the namespace %s and the remedy", got, f.ns)
	}
}

// The same, with the Python SDK (test/e2e/testdata/python/indexprobe.py).
func TestAPythonSidecarListsByTheIndexesItDeclares(t *testing.T) {
	t.Parallel()
	py := python(t)
	f := newFixture(t)
	sidecar := f.start("sidecar", py, filepath.Join(testenv.RepoRoot(), "test", "e2e", "testdata", "python", "indexprobe.py"), "--address", f.address())
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := sidecar.WaitForOutput(ctx, "Serving on "); err != nil {
		t.Fatal(err)
	}
	f.startHost()
	listsByIndexes(t, f)
}

// The same, with the TypeScript SDK (test/e2e/testdata/typescript/indexprobe.mjs).
func TestATypeScriptSidecarListsByTheIndexesItDeclares(t *testing.T) {
	t.Parallel()
	nodeBin := node(t)
	f := newFixture(t)
	sidecar := f.start("sidecar", nodeBin, filepath.Join(testenv.RepoRoot(), "test", "e2e", "testdata", "typescript", "indexprobe.mjs"), f.address())
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := sidecar.WaitForOutput(ctx, `"msg":"Serving"`); err != nil {
		t.Fatal(err)
	}
	f.startHost()
	listsByIndexes(t, f)
}

// listsByIndexes creates a Secret and ConfigMaps it controls or names, and
// waits for the sidecar's summary of the Secret to follow them.
func listsByIndexes(t *testing.T, f *fixture) {
	t.Helper()
	ctx := context.Background()

	parent := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "p"}}
	f.create(parent)
	owned := func(name string, uid types.UID) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: name, OwnerReferences: []metav1.OwnerReference{
			{APIVersion: "v1", Kind: "Secret", Name: "p", UID: uid, Controller: new(true)},
		}}}
	}
	f.create(owned("owned-1", parent.UID))
	f.create(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "named-1"}, Data: map[string]string{"parent": "p"}})
	f.create(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "unrelated"}, Data: map[string]string{"parent": "q"}})
	waitSummary(t, f.ns, "p", "owned-1", "named-1")

	f.create(owned("owned-2", parent.UID))
	f.create(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "named-2"}, Data: map[string]string{"parent": "p"}})
	waitSummary(t, f.ns, "p", "owned-1,owned-2", "named-1,named-2")

	var cm corev1.ConfigMap
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: f.ns, Name: "named-1"}, &cm); err != nil {
		t.Fatal(err)
	}
	cm.Data["parent"] = "q"
	if err := k8s.Update(ctx, &cm); err != nil {
		t.Fatal(err)
	}
	waitSummary(t, f.ns, "p", "owned-1,owned-2", "named-2")
}

// waitSummary waits for the sidecar's summary of Secret name to list those
// ConfigMaps, read from the host's cache.
func waitSummary(t *testing.T, ns, name, byController, byParent string) {
	t.Helper()
	want := map[string]string{"byController": byController, "byParent": byParent, "source": "Cache"}
	testenv.Eventually(t, 60*time.Second, fmt.Sprintf("the summary of %s lists %v", name, want), func() (bool, string) {
		var cm corev1.ConfigMap
		if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name + "-summary"}, &cm); err != nil {
			return false, err.Error()
		}
		for k, v := range want {
			if cm.Data[k] != v {
				return false, fmt.Sprint(cm.Data)
			}
		}
		return true, ""
	})
}

// A CEL expression that does not compile stops the host at start, naming the
// index, the kind and CEL's error.
func TestAHostRefusesAnIndexWhoseCELDoesNotCompile(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.start("sidecar", testSidecarBin, "index", "--address", f.address(), "--cel", "object.data.(")
	host := f.startHost()
	if code, err := host.Wait(60 * time.Second); err != nil || code == 0 {
		t.Fatalf("the host exited with %d (%v), want a failure", code, err)
	}
	for _, want := range []string{`indexes[1].cel`, `index "parent" on ConfigMap.v1`, "does not compile", "Syntax error"} {
		if !strings.Contains(host.Output(), want) {
			t.Errorf("the host's error does not say %s:\n%s", want, testenv.Tail(host.Output(), 20))
		}
	}
}
